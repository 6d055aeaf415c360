"""The hook's hard deadline: every call gets what is left of it."""

from __future__ import annotations

import time

__all__ = ["Deadline", "DeadlinePassed"]


class DeadlinePassed(Exception):
    """Nothing is left of the deadline for another call."""


class Deadline:
    def __init__(self, seconds: float, *, started: float | None = None) -> None:
        self.seconds = seconds
        self.started = time.monotonic() if started is None else started
        self.ends = self.started + seconds

    def left(self) -> float:
        """Seconds left for the next call; raises ``DeadlinePassed`` when none are."""
        left = self.ends - time.monotonic()
        if left <= 0.005:
            raise DeadlinePassed(f"the {self.seconds:g} s deadline passed")
        return left

    def elapsed(self) -> float:
        return time.monotonic() - self.started
