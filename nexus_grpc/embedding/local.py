"""What every in-process embedder shares: two lanes of threads.

Indexing batches run on ``threads`` niced threads, one core each; a search
query runs on a lane of its own at normal priority, so it never waits behind
an indexing batch (which takes seconds), and concurrent queries are coalesced
into one model run (see coalesce.py). A model subclass supplies the two
synchronous calls: documents and queries (asymmetric models, such as E5, embed
them with different prefixes).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .coalesce import CoalescingLane

#: Niceness of the indexing threads. Background embedding takes every core it is
#: given; at normal priority it pushed the event loop past 100 ms under write load.
BACKGROUND_NICE = 10


def _default_threads() -> int:
    # The target host has 2 cores; more threads than cores only adds contention.
    return max(1, min(2, os.cpu_count() or 1))


def _background_priority() -> None:
    """Runs in each indexing thread: searches and the event loop come first.

    On Linux a thread has its own nice value, so this lowers only the calling
    thread. Elsewhere it may lower nothing or the whole process, so it is skipped."""
    if sys.platform != "linux":
        return
    tid = threading.get_native_id()
    try:
        nice = os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICE
        os.setpriority(os.PRIO_PROCESS, tid, min(19, nice))
    except OSError:  # a sandbox that forbids it: run at normal priority
        pass


class LocalEmbedder:
    """An in-process model behind an indexing lane and a query lane."""

    model_id: str
    dimension: int

    def __init__(self, *, threads: int | None, batch_size: int, name: str) -> None:
        self._threads = threads if threads and threads > 0 else _default_threads()
        self._batch_size = batch_size
        self._name = name
        self._executor = ThreadPoolExecutor(
            max_workers=self._threads,
            thread_name_prefix=name,
            initializer=_background_priority,
        )
        self._query_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-q")
        self._queries = CoalescingLane(self._embed_query_batch, max_batch=batch_size)
        self._closed = False

    @property
    def threads(self) -> int:
        """Indexing batches run at once, each on one core."""
        return self._threads

    # -- what a model supplies ---------------------------------------------------------------

    def _embed_sync(self, texts: list[str]) -> np.ndarray:
        """Documents' vectors, [len(texts), dimension], unit length."""
        raise NotImplementedError

    def _embed_queries_sync(self, texts: list[str]) -> np.ndarray:
        """Search queries' vectors; a symmetric model embeds them as documents."""
        return self._embed_sync(texts)

    def _warm_sync(self) -> None:
        self._embed_queries_sync(["warm up"])

    # -- the lanes -----------------------------------------------------------------------------

    async def warm(self) -> None:
        """Load the model now instead of on the first call.

        On the query lane, at normal priority: a search waits on the load, and
        on a niced indexing thread under load it took seconds (and held up a
        SIGTERM that arrived meanwhile)."""
        await self._run(self._warm_sync, interactive=True)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Documents (episodes, memories, entities), on the indexing lane."""
        if not texts:
            return []
        items = [str(t) for t in texts]
        # A large call (a reindex page) is split across the indexing threads; a
        # worker's batch of 32 is not, as the job worker keeps two in flight.
        parts = min(self._threads, -(-len(items) // self._batch_size))
        if parts <= 1:
            vectors = await self._run(self._embed_sync, items)
            return vectors.tolist()  # type: ignore[no-any-return]
        done = await asyncio.gather(
            *(self._run(self._embed_sync, items[k::parts]) for k in range(parts))
        )
        out: list[list[float]] = [[] for _ in items]
        for k, vectors in enumerate(done):
            out[k::parts] = vectors.tolist()
        return out

    async def embed_query(self, text: str) -> list[float]:
        """One search query, on the query lane (coalesced with concurrent ones)."""
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
        return await self._queries.embed(str(text))

    async def _embed_query_batch(self, texts: list[str]) -> list[list[float]]:
        vectors = await self._run(self._embed_queries_sync, texts, interactive=True)
        return vectors.tolist()  # type: ignore[no-any-return]

    async def _run(self, fn: Callable[..., Any], *args: Any, interactive: bool = False) -> Any:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
        loop = asyncio.get_running_loop()
        executor = self._query_executor if interactive else self._executor
        return await loop.run_in_executor(executor, fn, *args)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._queries.close()
        # Let an in-flight batch finish without blocking the loop while it does.
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        await asyncio.to_thread(self._query_executor.shutdown, wait=True)
        self._release()

    def _release(self) -> None:
        """Drop the model once no thread can use it."""
