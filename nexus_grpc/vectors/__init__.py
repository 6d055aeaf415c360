"""Vector indexes: embedded qdrant-edge (default) or a Qdrant server, behind
one interface (``core.vectors.VectorIndex``). The third, pgvector in the
system of record's own PostgreSQL, is SQL and lives in the store
(``store.postgres.vector_index``)."""

from __future__ import annotations

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
from .remote import QdrantVectorIndex

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
