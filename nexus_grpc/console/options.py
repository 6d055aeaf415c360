"""``nexus-grpc console``'s own flags (the connection flags are the other client commands').

Kept apart from the web modules so that ``nexus-grpc --help`` works where
the ``[console]`` extra is not installed: nothing here imports Starlette.
"""

from __future__ import annotations

import argparse

# On loopback (ListenAddress.loopback) the console asks no login and checks Host.
from nexus_grpc.listen_address import ListenAddress, parse_listen

__all__ = ["DEFAULT_LISTEN", "ListenAddress", "add_arguments", "parse_listen"]

DEFAULT_LISTEN = "127.0.0.1:8090"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        default=parse_listen(DEFAULT_LISTEN),
        type=parse_listen,
        metavar="HOST:PORT",
        help=f"where the console serves HTTP (default {DEFAULT_LISTEN}; PORT alone: loopback;"
        " port 0: a free one, printed). Beyond loopback it asks for a login token",
    )
    parser.add_argument(
        "--console-token-file",
        default="",
        metavar="FILE",
        help="a file holding the login token (its first line) instead of one printed at start;"
        " given, the console asks for it on loopback too",
    )
