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

from collections.abc import Sequence
from typing import Any

import numpy as np

from nexus_grpc.core.loading_cache import LoadingCache

from .embedder import Embedder


class QueryVectorCache:
    """``inner`` with its query vectors remembered, least recently used out
    first, ``capacity`` texts at most (a 384-float vector is 3 KB)."""

    def __init__(self, inner: Embedder, capacity: int) -> None:
        self.inner = inner
        self._vectors: LoadingCache[str, np.ndarray] = LoadingCache(capacity)
        # The Embedder protocol's attributes are the model's own (fixed for its life).
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.similarity_temperature = inner.similarity_temperature
        self.similarity_floor = inner.similarity_floor

    def __getattr__(self, name: str) -> Any:
        # warm(), threads and the like: whatever else the backend offers.
        if name == "inner":  # not set yet: no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return len(self._vectors)

    @property
    def hits(self) -> int:
        """Answered from the cache, or from an embedding another caller started."""
        return self._vectors.hits

    @property
    def misses(self) -> int:
        """Embedded by the model."""
        return self._vectors.misses

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed(texts)

    async def embed_query(self, text: str) -> list[float]:
        key = str(text)

        async def embedded() -> np.ndarray:
            return np.asarray(await self.inner.embed_query(key), dtype=np.float64)

        # A fresh list each time: a caller may change what it was given.
        return (await self._vectors.get(key, embedded)).tolist()  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self._vectors.close()
        await self.inner.close()
