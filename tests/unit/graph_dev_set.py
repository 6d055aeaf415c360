"""The graph evaluation's committed dev set (bench/eval/graph-dev.json) for
the unit tier: ``DEV_SET`` is its path, and ``changed_dev_set`` writes a copy
of it with one thing changed under the test's tmp_path (loading a file is the
set loader's own job). Not a test module: the set format's refusals are
tested in two test modules on the same set (tests/unit/test_eval_graph.py,
test_eval_rules_graph_set.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEV_SET = Path(__file__).resolve().parents[2] / "bench" / "eval" / "graph-dev.json"


def changed_dev_set(tmp_path: Path, mutate: Callable[[dict[str, Any]], Any]) -> Path:
    """The dev set with ``mutate`` applied to its data, written as tmp_path/set.json."""
    data = json.loads(DEV_SET.read_text(encoding="utf-8"))
    mutate(data)
    path = tmp_path / "set.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
