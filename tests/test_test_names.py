"""Every test the prose points at exists.

Tests move between tiers (docs/testing.md), and the documents, docstrings
and comments that say where a rule is proven name them: a test file
(``tests/unit/test_paging.py``) or one test in it
(``tests/e2e/api/test_auth.py::test_every_method_refuses_an_unknown_key``).
A move takes every such mention along, or this fails naming the place.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: What is read: the documents, and the prose of the package and the tests.
PLACES = (
    "README.md",
    "docs",
    "nexus_grpc",
    "tests",
    "bench",
    "deploy",
    "clients/typescript/README.md",
)
SKIP = {".venv", "node_modules", "gen", "__pycache__"}
_NAMED = re.compile(r"(?<![\w./-])(tests/(?:[\w-]+/)*test_\w+\.py)(?:::(\w+))?")


def _texts() -> list[tuple[Path, str]]:
    found = []
    for place in PLACES:
        root = REPO / place
        paths = [root] if root.is_file() else []
        # os.walk, pruned: the agent hosts' node_modules under tests/ hold
        # hundreds of thousands of files.
        for folder, dirs, files in os.walk(root) if root.is_dir() else ():
            dirs[:] = sorted(d for d in dirs if d not in SKIP and not d.startswith("."))
            paths += [Path(folder) / f for f in sorted(files)]
        for path in paths:
            if path.suffix in {".md", ".py"}:
                found.append((path, path.read_text(encoding="utf-8")))
    return found


def missing_tests(text: str, repo: Path = REPO) -> list[str]:
    """The test files, and the tests in them, ``text`` names that do not exist."""
    gone = []
    for match in _NAMED.finditer(text):
        path, test = match.group(1), match.group(2)
        file = repo / path
        if not file.is_file():
            gone.append(match.group(0))
        elif test and not re.search(rf"def {re.escape(test)}\b", file.read_text(encoding="utf-8")):
            gone.append(match.group(0))
    return gone


def test_every_test_the_prose_names_exists():
    texts = _texts()
    assert sum(len(_NAMED.findall(text)) for _, text in texts) > 100, "the check reads nothing"
    gone = [
        f"{path.relative_to(REPO)}: {name}"
        for path, text in texts
        if path != Path(__file__).resolve()
        for name in missing_tests(text)
    ]
    assert gone == []


def test_the_check_sees_a_test_file_and_a_test_that_are_gone(tmp_path):
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "test_kept.py").write_text("def test_here():\n    pass\n")
    text = (
        "`tests/unit/test_kept.py::test_here`, tests/unit/test_kept.py::test_moved, "
        "and tests/e2e/test_gone.py"
    )
    assert missing_tests(text, tmp_path) == [
        "tests/unit/test_kept.py::test_moved",
        "tests/e2e/test_gone.py",
    ]
