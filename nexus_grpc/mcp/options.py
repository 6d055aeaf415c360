"""``nexus-grpc mcp``'s own flags (the connection flags are the other client commands').

Kept apart from the server module so that ``nexus-grpc --help`` works where
the ``[mcp]`` extra is not installed: nothing here imports the SDK.
"""

from __future__ import annotations

import argparse

from nexus_grpc.control_chars import CONTROL_CHARS
from nexus_grpc.listen_address import parse_listen

__all__ = ["add_arguments"]

MAX_NAME_CHARS = 200


def _name(what: str, *, required: bool):  # type: ignore[no-untyped-def]
    def check(value: str) -> str:
        if required and not value.strip():
            raise argparse.ArgumentTypeError(f"{what} must not be blank")
        if len(value) > MAX_NAME_CHARS:
            raise argparse.ArgumentTypeError(
                f"{what} is {len(value)} characters; the limit is {MAX_NAME_CHARS}"
            )
        if CONTROL_CHARS.search(value):
            raise argparse.ArgumentTypeError(f"{what} must not contain control characters")
        if value != value.strip():
            raise argparse.ArgumentTypeError(f"{what} must not start or end with whitespace")
        return value

    return check


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project",
        required=True,
        type=_name("--project", required=True),
        metavar="NAME",
        help="the project every agent session shares (found by name in the API key's tenant,"
        " created on first use)",
    )
    parser.add_argument(
        "--session",
        default="",
        type=_name("--session", required=False),
        metavar="ID",
        help="the agent session a tool call acts in when it names no session_id (default:"
        " the MCP connection's own: one per stdio process, the Mcp-Session-Id over HTTP)",
    )
    parser.add_argument(
        "--user",
        default="",
        type=_name("--user", required=False),
        help="the user the agent works for: the owner whose USER memories the tools see"
        " (default: none)",
    )
    parser.add_argument(
        "--agent",
        default="",
        type=_name("--agent", required=False),
        help="the agent id: PROJECT memories are stored as this agent's, and the tools see"
        " only this agent's (default: every agent's)",
    )
    parser.add_argument(
        "--http",
        default=None,
        type=parse_listen,
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (PORT alone:"
        " loopback; port 0: a free one, printed on stderr)",
    )
