"""Where a command serves HTTP, as its flag takes it (``console --listen``, ``mcp --http``).

Below both commands, which may not import each other (each is an extra of
its own), and importing nothing but the standard library, so ``nexus-grpc
--help`` works with neither extra installed.
"""

from __future__ import annotations

import argparse
import ipaddress
from dataclasses import dataclass

__all__ = ["ListenAddress", "parse_listen"]


@dataclass(frozen=True)
class ListenAddress:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        """Reachable from this machine only."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_listen(value: str) -> ListenAddress:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` alone (loopback); IPv6 as ``[::1]:PORT``."""
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
