"""Vector indexes: embedded qdrant-edge (default) or a Qdrant server, behind
one interface (``core.vectors.VectorIndex``). The third, pgvector in the
system of record's own PostgreSQL, is SQL and lives in the store
(``store.postgres.vector_index``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nexus_grpc.core.vectors import (
    CollectionNotFound,
    Cond,
    DimensionMismatch,
    Filter,
    MatchAny,
    Range,
    VectorHit,
    VectorIndex,
    VectorIndexLocked,
    VectorIndexUnavailable,
    VectorPoint,
)

from .edge import EdgeVectorIndex

if TYPE_CHECKING:
    from .remote import QdrantVectorIndex


def __getattr__(name: str) -> object:
    # qdrant-client takes half a second to import, and only a server given
    # --qdrant-url uses it: the embedded and pgvector indexes start without it.
    if name == "QdrantVectorIndex":
        from .remote import QdrantVectorIndex

        return QdrantVectorIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CollectionNotFound",
    "Cond",
    "DimensionMismatch",
    "EdgeVectorIndex",
    "Filter",
    "MatchAny",
    "QdrantVectorIndex",
    "Range",
    "VectorHit",
    "VectorIndex",
    "VectorIndexLocked",
    "VectorIndexUnavailable",
    "VectorPoint",
]
