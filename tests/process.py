"""The process-based tests' helpers: the real ``nexus-grpc serve`` as a subprocess.

The launcher and the queue polling are the package's (``nexus_grpc.loadtest.launcher``),
the same ones ``make bench`` starts its servers with; what only tests need stays here.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nexus_grpc.loadtest.launcher import (
    PORT_LINE,
    ServerProcess,
    StartError,
    queue_depths,
    wait_queue_empty,
)

__all__ = [
    "PORT_LINE",
    "ServerProcess",
    "StartError",
    "queue_depths",
    "read_only",
    "wait_queue_empty",
]


def read_only(path: Path) -> sqlite3.Connection:
    """A reader beside a live server (WAL lets it read while the server writes)."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)
