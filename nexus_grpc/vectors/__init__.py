"""Vector indexes: embedded qdrant-edge (default) or a Qdrant server, behind one interface."""

from __future__ import annotations

from .base import (
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
from .pgvector import PgVectorIndex
from .remote import QdrantVectorIndex

__all__ = [
    "CollectionNotFound",
    "Cond",
    "DimensionMismatch",
    "EdgeVectorIndex",
    "Filter",
    "MatchAny",
    "PgVectorIndex",
    "QdrantVectorIndex",
    "Range",
    "VectorHit",
    "VectorIndex",
    "VectorIndexLocked",
    "VectorIndexUnavailable",
    "VectorPoint",
]
