"""``nexus-grpc mcp``'s own flags (mcp/options.py) and the session ids it gives agents
(mcp/workspace.py ``external_id_for``), without a server or the MCP SDK's transports.

(``nexus-grpc mcp`` run as agents run it, over stdio and HTTP against a real server:
tests/e2e/mcp/test_mcp_agents.py and test_mcp_workspace.py.)"""

from __future__ import annotations

import argparse
import uuid

import pytest

from nexus_grpc.listen_address import ListenAddress
from nexus_grpc.mcp.options import MAX_NAME_CHARS, add_arguments
from nexus_grpc.mcp.workspace import external_id_for


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nexus-grpc mcp")
    add_arguments(parser)
    return parser.parse_args(list(argv))


def refusal(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as info:
        parse(*argv)
    assert info.value.code == 2
    return capsys.readouterr().err


def test_agent_session_ids_map_to_external_ids():
    claude = str(uuid.uuid4())
    assert external_id_for("p", claude) == claude
    assert external_id_for("p", claude.upper()) == claude  # one UUID, however written
    plain = external_id_for("p", "terminal-1")
    assert str(uuid.UUID(plain)) == plain
    assert plain == external_id_for("p", "terminal-1")
    assert plain != external_id_for("q", "terminal-1")


def test_mcp_needs_a_project(capsys):
    assert "the following arguments are required: --project" in refusal(capsys)
    assert "--project must not be blank" in refusal(capsys, "--project", "  ")


def test_the_scope_flags_default_to_none_and_stdio():
    args = parse("--project", "webshop")
    assert (args.project, args.session, args.user, args.agent, args.http) == (
        "webshop", "", "", "", None,
    )  # fmt: skip
    named = parse("--project", "web shop", "--session", "s1", "--user", "ann", "--agent", "bot")
    assert (named.project, named.session, named.user, named.agent) == (
        "web shop", "s1", "ann", "bot",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--project", "x" * (MAX_NAME_CHARS + 1), "--project is 201 characters; the limit is 200"),
        ("--user", "ann\x07", "--user must not contain control characters"),
        ("--agent", " bot", "--agent must not start or end with whitespace"),
        ("--session", "s1\n", "--session must not contain control characters"),
    ],
)
def test_a_name_the_server_would_refuse_is_refused_naming_its_flag(capsys, flag, value, says):
    argv = ["--project", "p", flag, value] if flag != "--project" else [flag, value]
    assert says in refusal(capsys, *argv)


def test_a_name_at_the_limit_and_an_empty_optional_one_pass():
    args = parse("--project", "x" * MAX_NAME_CHARS, "--user", "")
    assert len(args.project) == MAX_NAME_CHARS and args.user == ""


def test_http_takes_a_host_and_port_or_a_loopback_port(capsys):
    assert parse("--project", "p", "--http", "8765").http == ListenAddress("127.0.0.1", 8765)
    assert parse("--project", "p", "--http", "0.0.0.0:0").http == ListenAddress("0.0.0.0", 0)
    assert parse("--project", "p", "--http", "[::1]:9").http == ListenAddress("::1", 9)
    assert parse("--project", "p", "--http", "8765").http.loopback
    assert not parse("--project", "p", "--http", "0.0.0.0:1").http.loopback
    assert "port must be 0-65535, got 70000" in refusal(capsys, "--project", "p", "--http",
                                                         "70000")  # fmt: skip
    assert "takes HOST:PORT or PORT, got 'web'" in refusal(capsys, "--project", "p", "--http",
                                                           "web")  # fmt: skip
