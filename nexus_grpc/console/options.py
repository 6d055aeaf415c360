"""``nexus-grpc console``'s own flags (the connection flags are the other client commands').

Kept apart from the web modules so that ``nexus-grpc --help`` works where
the ``[console]`` extra is not installed: nothing here imports Starlette.
"""

from __future__ import annotations

import argparse
import ipaddress
from dataclasses import dataclass

__all__ = ["DEFAULT_LISTEN", "ListenAddress", "add_arguments", "parse_listen"]

DEFAULT_LISTEN = "127.0.0.1:8090"


@dataclass(frozen=True)
class ListenAddress:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        """Reachable from this machine only: no login asked, Host checked."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_listen(value: str) -> ListenAddress:
    """``HOST:PORT``, or ``PORT`` alone (loopback); IPv6 as ``[::1]:PORT``."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes HOST:PORT or PORT, got {value!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {number}")
    return ListenAddress(host, number)


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
