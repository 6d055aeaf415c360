"""What ``pip install 'nexus-grpc[mcp]'`` brings, read from pyproject.toml and the
installed distributions' metadata: the MCP SDK and the client, no server dependency.

(The MCP server running where the server's dependencies cannot import, and the command
without the extra, in child interpreters: tests/e2e/mcp/test_mcp_light_install.py.)"""

from __future__ import annotations

import tomllib

from tests.unit.distribution_walk import ROOT, SERVER_DISTRIBUTIONS, closure, distribution_name


def test_the_mcp_extra_brings_no_server_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["mcp"]
    assert [distribution_name(r) for r in extra] == ["mcp"]
    brought = closure(extra + project["dependencies"])
    assert "mcp" in brought and "grpcio" in brought  # the walk really followed the metadata
    assert brought.isdisjoint(SERVER_DISTRIBUTIONS), brought & SERVER_DISTRIBUTIONS
