"""A bounded in-process cache whose misses are loaded once, however many ask.

Used where a search would otherwise repeat a costly, pure lookup: a scope's
common words (domain/retrieval/common_terms.py) and a question's vector
(embedding/query_cache.py).

- Least recently used out first, ``capacity`` entries at most; with ``ttl`` an
  entry is also stale that many seconds after it was loaded.
- Concurrent askers of a key being loaded share that one load. It runs in its
  own task, so a caller that is cancelled (its client went away) does not cancel
  it for the others; a load nobody waits for any more still finishes and is kept.
- A failed load is not kept: every waiter gets its exception, and the next ask
  loads again.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LoadingCache(Generic[K, V]):
    def __init__(
        self,
        capacity: int,
        *,
        ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._ttl = ttl
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()  # key -> (expiry, value)
        self._loading: dict[K, asyncio.Task[V]] = {}
        self.hits = 0  # answered from an entry, or from a load another caller started
        self.misses = 0  # loads started

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        """The value of ``key``, from ``load()`` when it is not cached."""
        entry = self._entries.get(key)
        if entry is not None and entry[0] > self._clock():
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]
        task = self._loading.get(key)
        if task is None:
            self.misses += 1
            task = asyncio.create_task(_awaited(load))
            self._loading[key] = task
            task.add_done_callback(functools.partial(self._settle, key))
        else:
            self.hits += 1
        return await asyncio.shield(task)

    def _settle(self, key: K, task: asyncio.Task[V]) -> None:
        del self._loading[key]
        if task.cancelled() or task.exception() is not None:
            return
        expiry = float("inf") if self._ttl is None else self._clock() + self._ttl
        self._entries[key] = (expiry, task.result())
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    async def close(self) -> None:
        """Cancels the loads in flight and forgets every entry."""
        loading = list(self._loading.values())
        for task in loading:
            task.cancel()
        await asyncio.gather(*loading, return_exceptions=True)
        self._entries.clear()


async def _awaited(load: Callable[[], Awaitable[V]]) -> V:
    return await load()
