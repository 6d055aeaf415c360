"""What SearchMemories and SearchEntities return (SearchEpisodes' EpisodeHit
is in core.models)."""

from __future__ import annotations

from dataclasses import dataclass

from nexus_grpc.core.graph import Entity
from nexus_grpc.core.models import SearchSource
from nexus_grpc.core.records import Memory


@dataclass(frozen=True)
class MemoryHit:
    memory: Memory
    score: float
    sources: tuple[SearchSource, ...]
    #: Why the answer is less than the whole pipeline; empty when every stage ran.
    degraded_reason: str = ""
    #: The reranker ordered it: ``score`` is its relevance score.
    reranked: bool = False


@dataclass(frozen=True)
class EntityHit:
    entity: Entity
    score: float
    degraded_reason: str = ""
    reranked: bool = False
