"""How late the event loop runs: the measure of anything blocking it.

Every RPC, stream and worker shares one asyncio loop. Anything that holds it
(a CPU-bound call made inline, a lock held across a blocking call) delays all
of them at once, and shows up nowhere else. A ticker that asks to wake every
``interval`` seconds and records how late it woke measures exactly that delay.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from dataclasses import dataclass

#: Seconds. The upper bounds of the lag histogram's buckets.
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass(frozen=True)
class LoopLag:
    samples: int
    max_seconds: float
    #: Samples at or under each bound of LAG_BUCKETS (cumulative, Prometheus-style).
    bucket_counts: tuple[int, ...]
    total_seconds: float


class LoopLagMonitor:
    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self._counts = [0] * (len(LAG_BUCKETS) + 1)
        self._samples = 0
        self._max = 0.0
        self._total = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._tick(), name="loop-lag-monitor")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def record(self, lag: float) -> None:
        lag = max(0.0, lag)
        self._samples += 1
        self._total += lag
        self._max = max(self._max, lag)
        self._counts[bisect.bisect_left(LAG_BUCKETS, lag)] += 1

    def snapshot(self) -> LoopLag:
        cumulative, running = [], 0
        for count in self._counts[:-1]:
            running += count
            cumulative.append(running)
        return LoopLag(self._samples, self._max, tuple(cumulative), self._total)

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time()
            await asyncio.sleep(self.interval)
            self.record(loop.time() - asked - self.interval)
