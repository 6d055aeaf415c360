"""What the three searches return, in one place: SearchEpisodes' EpisodeHit,
SearchMemories' MemoryHit and SearchEntities' EntityHit, and the explanation
a hit carries when its search asked for one (``explain``)."""

from __future__ import annotations

from dataclasses import dataclass

from nexus_grpc.core.graph import Entity
from nexus_grpc.core.models import Episode, SearchSource
from nexus_grpc.core.records import Memory


@dataclass(frozen=True)
class StageScore:
    """What one stage of the pipeline made of a hit (``explain``).

    ``stage``: ``keyword``, ``semantic``, ``fused``, ``reranked`` (a stage
    added later reports under its own name); ``rank``: 1-based among that
    stage's candidates, 0 where the stage did not find the hit; ``score``:
    the stage's own (bm25, cosine, the fused likelihood, the reranker's
    relevance); ``note``: what a person needs (the words that matched, a
    stage skipped and why)."""

    stage: str
    rank: int
    score: float
    note: str = ""


@dataclass(frozen=True)
class EpisodeHit:
    episode: Episode
    score: float
    snippet: str
    sources: tuple[SearchSource, ...]
    #: Why the answer is less than the whole pipeline; empty when every stage ran.
    degraded_reason: str = ""
    #: The reranker ordered it: ``score`` is its relevance score.
    reranked: bool = False
    #: Each stage's rank and score, in pipeline order; empty unless asked.
    explanation: tuple[StageScore, ...] = ()


@dataclass(frozen=True)
class MemoryHit:
    memory: Memory
    score: float
    sources: tuple[SearchSource, ...]
    #: Why the answer is less than the whole pipeline; empty when every stage ran.
    degraded_reason: str = ""
    #: The reranker ordered it: ``score`` is its relevance score.
    reranked: bool = False
    explanation: tuple[StageScore, ...] = ()


@dataclass(frozen=True)
class EntityHit:
    entity: Entity
    score: float
    degraded_reason: str = ""
    reranked: bool = False
    explanation: tuple[StageScore, ...] = ()
