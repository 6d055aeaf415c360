"""``nexus-grpc hooks``' flags. Nothing here imports grpc: ``hooks install`` and
``--help`` stay cheap, and ``hooks run`` parses its flags before the calls'
imports start."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

__all__ = ["DEFAULTS", "HOST_NAMES", "add_install", "add_run", "add_uninstall", "run_parser"]

HOST_NAMES = ("claude-code", "codex", "gemini")
DEFAULTS: dict[str, Any] = {
    "target": "127.0.0.1:50051",
    "deadline": 1.5,
    "session_tokens": 1000,
    "prompt_tokens": 600,
}


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes seconds, got {value!r}") from None
    if not 0 < seconds <= 60:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 60 s, got {value}")
    return seconds


def _tokens(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a number of tokens, got {value!r}") from None
    if not 0 <= n <= 100_000:
        raise argparse.ArgumentTypeError(f"must be 0 to 100000, got {value}")
    return n


def _connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target", default=DEFAULTS["target"], help="server HOST:PORT (default: %(default)s)"
    )
    parser.add_argument(
        "--api-key",
        default="",
        help="sent as authorization: Bearer KEY; default: the key in --api-key-file, else"
        " $NEXUS_API_KEY",
    )
    parser.add_argument(
        "--api-key-file",
        default="",
        metavar="PATH",
        help="a file holding the API key (kept out of the host's settings and out of ps)",
    )
    parser.add_argument("--cacert", default="", help="PEM root certificates: use TLS")
    parser.add_argument("--cert", default="", help="PEM client certificate, for mTLS")
    parser.add_argument("--key", default="", help="PEM client private key, for mTLS")


def _behaviour(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project",
        default="",
        metavar="NAME",
        help="the project (found by name in the key's tenant, created on the first exchange);"
        " default: the name of the git work tree's root folder, else of the folder the agent"
        " runs in",
    )
    parser.add_argument(
        "--user",
        default="",
        metavar="ID",
        help="whose USER memories are recalled and formed (default: the OS user)",
    )
    parser.add_argument(
        "--deadline",
        type=_positive_seconds,
        default=DEFAULTS["deadline"],
        metavar="SECONDS",
        help="the hook answers (or gives up, adding nothing) within this (default: %(default)s)",
    )
    parser.add_argument(
        "--session-tokens",
        type=_tokens,
        default=DEFAULTS["session_tokens"],
        metavar="N",
        help="context added when a session starts, at most (default: %(default)s tokens)",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=_tokens,
        default=DEFAULTS["prompt_tokens"],
        metavar="N",
        help="context added with each prompt, at most (default: %(default)s tokens)",
    )


def add_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("host", choices=HOST_NAMES, help="the agent host that runs the hook")
    _connection(parser)
    _behaviour(parser)


def add_install(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("host", choices=HOST_NAMES, help="the agent host")
    parser.add_argument(
        "--scope",
        choices=("project", "user"),
        default="project",
        help="project: the project's settings (.claude/settings.json, .codex/hooks.json,"
        " .gemini/settings.json at the git root); user: the user's (default: %(default)s)",
    )
    _connection(parser)
    _behaviour(parser)


def add_uninstall(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("host", choices=HOST_NAMES, help="the agent host")
    parser.add_argument(
        "--scope",
        choices=("project", "user"),
        default="project",
        help="which settings to take our hooks out of (default: %(default)s)",
    )


class _HookParser(argparse.ArgumentParser):
    """A flag it does not know is one line on stderr and exit 0, like every other
    failure of a hook: argparse's exit 2 would tell Claude Code and Gemini CLI to
    block the prompt (a command installed by another version must not)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"nexus-grpc hooks: {message}; no context\n")
        raise SystemExit(0)


def run_parser() -> argparse.ArgumentParser:
    """``nexus-grpc hooks run``'s parser alone, for the fast path in cli.main."""
    parser = _HookParser(
        prog="nexus-grpc hooks run",
        description="run one hook event: the host's JSON on stdin, the context on stdout",
    )
    add_run(parser)
    return parser
