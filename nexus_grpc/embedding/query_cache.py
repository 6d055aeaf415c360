"""Remember recent search-query vectors, and embed each text once at a time.

An orchestrator asks the same question more than once: a retry after a
deadline, semantic then default mode, the next page, SearchEntities and
SearchEpisodes with the user's message (each search embeds the question less
the words too common in its scope to rank, so two scopes share a vector when
the question holds none of those). Each call embedded its text again: about
1.1–1.6 ms of CPU on the offline model (the largest part of a semantic call,
docs/benchmarks.md), a network round trip on Ollama. A query vector depends on nothing but the model
and the text, so it can be reused exactly; the cache is per process and per
embedder, so a model change (which needs a restart and a reindex) starts it
empty.

- Hits return the very floats the model gave (kept as float64, which holds a
  float32 model's output and an Ollama answer's JSON numbers exactly), so
  ranking is unchanged by construction.
- Concurrent calls for a text not yet cached share one embedding: a caller
  that is cancelled does not cancel it for the others.
- Failures are not remembered: the next call tries the model again.
- Documents (``embed``) pass straight through: each is embedded once by its job.
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import Embedder


class QueryVectorCache:
    """``inner`` with its query vectors remembered, least recently used out
    first, ``capacity`` texts at most (a 384-float vector is 3 KB)."""

    def __init__(self, inner: Embedder, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.inner = inner
        self.capacity = capacity
        # The Embedder protocol's attributes are the model's own (fixed for its life).
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.similarity_temperature = inner.similarity_temperature
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._pending: dict[str, asyncio.Task[list[float]]] = {}
        self.hits = 0  # answered from the cache or from another caller's embedding
        self.misses = 0  # embedded by the model

    def __getattr__(self, name: str) -> Any:
        # warm(), threads and the like: whatever else the backend offers.
        if name == "inner":  # not set yet: no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return len(self._vectors)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed(texts)

    async def embed_query(self, text: str) -> list[float]:
        key = str(text)
        stored = self._vectors.get(key)
        if stored is not None:
            self._vectors.move_to_end(key)
            self.hits += 1
            return stored.tolist()  # type: ignore[no-any-return]
        task = self._pending.get(key)
        if task is None:
            self.misses += 1
            task = asyncio.create_task(self.inner.embed_query(key), name="embed-query")
            self._pending[key] = task
            task.add_done_callback(functools.partial(self._settle, key))
        else:
            self.hits += 1
        # shield: one caller's cancellation must not cancel the embedding the others await.
        vector = await asyncio.shield(task)
        return list(vector)

    def _settle(self, key: str, task: asyncio.Task[list[float]]) -> None:
        self._pending.pop(key, None)
        if task.cancelled() or task.exception() is not None:
            return  # not remembered: the next call asks the model again
        self._vectors[key] = np.asarray(task.result(), dtype=np.float64)
        self._vectors.move_to_end(key)
        while len(self._vectors) > self.capacity:
            self._vectors.popitem(last=False)

    async def close(self) -> None:
        pending = list(self._pending.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._vectors.clear()
        await self.inner.close()
