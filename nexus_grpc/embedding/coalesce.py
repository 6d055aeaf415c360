"""Coalesce concurrent single-text embeds into batches.

Search queries arrive one text per RPC. Run one at a time, sixteen concurrent
searches queue behind each other on the model (3.5 ms each for a short query
on two cores, so the sixteenth waits ~55 ms). Run as one batch they cost about
as much as five single runs. There is no timer: the first query starts at
once, and whatever arrives while a batch runs goes into the next one, so an
idle server adds no latency and a busy one batches in proportion to its load.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

RunBatch = Callable[[list[str]], Awaitable[Sequence[Sequence[float]]]]


class CoalescingLane:
    """``lanes``: how many batches may run at once (one by default, as search
    queries run; more where the model has more threads to run them on). A new
    text starts a batch at once while fewer than ``lanes`` run; otherwise it
    waits for the next free one."""

    def __init__(self, run: RunBatch, max_batch: int, lanes: int = 1) -> None:
        self._run = run
        self._max_batch = max_batch
        self._lanes = max(1, lanes)
        self._waiting: list[tuple[str, asyncio.Future[list[float]]]] = []
        # Each drain runs in its own task, so a caller that is cancelled (its
        # client went away) cannot strand the others waiting in its batch.
        self._drain_tasks: set[asyncio.Task[None]] = set()
        self.batches = 0  # for tests and stats: how many model runs served the queries

    async def embed(self, text: str) -> list[float]:
        future: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        self._waiting.append((text, future))
        # A drain that found nothing more to take has returned (done), though
        # its done callback may not have removed it yet.
        if sum(not t.done() for t in self._drain_tasks) < self._lanes:
            task = asyncio.create_task(self._drain(), name="embed-query-lane")
            self._drain_tasks.add(task)
            task.add_done_callback(self._drain_tasks.discard)
        return await future

    async def _drain(self) -> None:
        while self._waiting:
            taken = self._waiting[: self._max_batch]
            del self._waiting[: self._max_batch]
            live = [(text, f) for text, f in taken if not f.done()]
            if not live:
                continue
            self.batches += 1
            try:
                vectors = await self._run([text for text, _ in live])
            except asyncio.CancelledError:
                for _, f in live:
                    f.cancel()
                raise
            except Exception as e:  # each waiter gets the failure, as its own call would
                for _, f in live:
                    if not f.done():
                        f.set_exception(e)
                continue
            for (_, f), vector in zip(live, vectors, strict=True):
                if not f.done():
                    f.set_result(list(vector))

    async def close(self) -> None:
        tasks = [t for t in self._drain_tasks if not t.done()]
        self._drain_tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for _, f in self._waiting:
            f.cancel()
        self._waiting.clear()
