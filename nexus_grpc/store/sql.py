"""Small helpers every store module's SQL uses: the clock rows are stamped
with, the placeholders of an IN list, and the base of the repositories'
classes (one connection, ``self.conn``)."""

from __future__ import annotations

import time

from nexus_grpc.core.storage import Connection


def now() -> float:
    return time.time()


def placeholders(n: int) -> str:
    """``?, ?, ?`` for an IN list of n values."""
    return ",".join("?" * n)


class OnConnection:
    """A repository's class on one connection: its methods run their
    statements on ``self.conn``, in the caller's transaction."""

    __slots__ = ("conn",)

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
