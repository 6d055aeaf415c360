"""In-process wake-ups for job workers.

The jobs table is the source of truth; these events only save a worker from
polling when a write has just queued work for it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict


class JobSignals:
    def __init__(self) -> None:
        self._events: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    def wake(self, *kinds: str) -> None:
        for kind in kinds:
            self._events[kind].set()

    def event(self, kind: str) -> asyncio.Event:
        return self._events[kind]
