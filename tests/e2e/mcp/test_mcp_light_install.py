"""`pip install 'nexus-grpc[mcp]'` is the MCP server and the client, without the server's
dependencies; without the extra, `nexus-grpc mcp` says what to install. Here in child
interpreters where those cannot import; the extra's dependencies, read from
pyproject.toml and the installed metadata: tests/unit/test_mcp_packaging.py."""

from __future__ import annotations

import subprocess
import sys

from mcp import Client, StdioServerParameters

from tests.e2e.mcp.agents import indexed, ok
from tests.light_install import ROOT, RUN_CLI, SERVER_IMPORTS, blocker


async def test_the_mcp_server_runs_without_the_server_dependencies(harness):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", blocker(SERVER_IMPORTS) + RUN_CLI, "mcp", "--target", harness.target,
              "--project", "light"],
        cwd=str(ROOT),
    )  # fmt: skip
    async with Client(params) as agent:
        assert len((await agent.list_tools()).tools) == 11
        stored = await ok(agent, "memory_add_fact", content="light installs work",
                          tier="longterm", session_id="s")  # fmt: skip
        await indexed(harness)
        found = await ok(agent, "memory_query", query="light installs", session_id="s")
        assert [m["id"] for m in found["memories"]] == [stored["memory"]["id"]]


def test_without_the_extra_mcp_says_what_to_install_and_the_cli_still_works():
    # Positive control: the blocker blocks the SDK.
    blocked = subprocess.run(
        [sys.executable, "-c", blocker(("mcp",)) + "import mcp"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert blocked.returncode != 0 and "mcp" in blocked.stderr
    result = subprocess.run(
        [sys.executable, "-c", blocker(("mcp",)) + RUN_CLI, "mcp", "--project", "p"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "pip install 'nexus-grpc[mcp]'" in result.stderr
    helped = subprocess.run(
        [sys.executable, "-c", blocker(("mcp",)) + RUN_CLI, "mcp", "--help"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert helped.returncode == 0 and "--project" in helped.stdout
