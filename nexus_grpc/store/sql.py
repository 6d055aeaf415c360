"""Small helpers every store module's SQL uses: the clock rows are stamped
with, and the placeholders of an IN list."""

from __future__ import annotations

import time


def now() -> float:
    return time.time()


def placeholders(n: int) -> str:
    """``?, ?, ?`` for an IN list of n values."""
    return ",".join("?" * n)
