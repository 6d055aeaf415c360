"""The embedding interface shared by every embedder backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from nexus_grpc.errors import DependencyError


class EmbedderUnavailable(DependencyError):
    """A remote embedder cannot be reached right now; the caller may retry later."""

    unreachable = True


class EmbeddingDimensionMismatch(ValueError):
    """The model returned vectors of a different size than configured (a config error,
    not retryable: the vector index was created for the configured dimension)."""


@runtime_checkable
class Embedder(Protocol):
    # Recorded alongside stored vectors so that a model change is detected and the
    # index can be rebuilt instead of silently mixing incompatible embedding spaces.
    model_id: str
    dimension: int

    #: Cosine similarity behind the best semantic hit that costs a factor of e
    #: when hybrid search weighs this model's hits (domain/retrieval/ranking.py); each
    #: model spreads its cosines differently.
    similarity_temperature: float

    #: Cosine similarity below which a semantic candidate matched nothing: the
    #: vector path never returns it (no query is so unlike its answer). Set per
    #: model from its cosines on the LoCoMo dev split, at no loss of recall
    #: (docs/recall.md, "A floor for semantic hits"); -1.0: none.
    similarity_floor: float

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per document text, in order. Never blocks the
        event loop."""
        ...

    async def embed_query(self, text: str) -> list[float]:
        """The vector of a search query (asymmetric models embed queries and
        documents differently); searches call this, never ``embed``."""
        ...

    async def close(self) -> None: ...
