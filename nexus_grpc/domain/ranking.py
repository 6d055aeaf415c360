"""Reciprocal rank fusion (Cormack et al., 2009).

Fusing ranks rather than scores means bm25 and cosine never need to be put
on one scale; k=60 is the constant from the paper and what most hybrid
engines use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nexus_grpc.domain.models import SearchSource
from nexus_grpc.errors import Unavailable

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[K]], k: int = RRF_K
) -> list[tuple[K, float]]:
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: item[1], reverse=True)


# Hybrid search fetches this many times the limit from each path, so fusion
# has candidates to reorder.
HYBRID_CANDIDATE_FACTOR = 3
H = TypeVar("H")


@dataclass(frozen=True)
class Fused(Generic[H]):
    """One hybrid hit: its RRF score and the hit from each path that found it."""

    score: float
    keyword: H | None
    semantic: H | None

    @property
    def hit(self) -> H:
        found = self.keyword if self.keyword is not None else self.semantic
        assert found is not None
        return found

    @property
    def sources(self) -> tuple[SearchSource, ...]:
        return tuple(
            source
            for source, hit in (
                (SearchSource.KEYWORD, self.keyword),
                (SearchSource.SEMANTIC, self.semantic),
            )
            if hit is not None
        )


def fuse(
    keyword: Sequence[H], semantic: Sequence[H], key: Callable[[H], int], limit: int
) -> list[Fused[H]]:
    """Keyword and semantic hits fused by reciprocal rank, best first."""
    by_keyword = {key(h): h for h in keyword}
    by_semantic = {key(h): h for h in semantic}
    fused = reciprocal_rank_fusion([list(by_keyword), list(by_semantic)])
    return [Fused(score, by_keyword.get(k), by_semantic.get(k)) for k, score in fused[:limit]]


async def hybrid_halves(
    keyword: Coroutine[Any, Any, list[H]],
    semantic: Coroutine[Any, Any, list[H]],
    on_degraded: Callable[[str], None] | None,
) -> tuple[list[H], list[H]]:
    """Both halves of a hybrid search at once: the keyword half reads SQLite on
    a reader thread while the semantic half embeds on the model's, so a hybrid
    search costs the slower half, not the sum. A failure in either ends both."""
    keyword_task = asyncio.ensure_future(keyword)
    try:
        semantic_hits = await keyword_if_down(semantic, on_degraded)
        return await keyword_task, semantic_hits
    finally:
        if not keyword_task.done():
            keyword_task.cancel()


async def keyword_if_down(
    semantic: Awaitable[list[H]], on_degraded: Callable[[str], None] | None
) -> list[H]:
    """A hybrid search's semantic half; when the embedder or the index is
    down, an empty list (the keyword half still answers) and a report."""
    try:
        return await semantic
    except Unavailable as exc:
        log.warning("hybrid search answered from keywords only: %s", exc)
        if on_degraded is not None:
            on_degraded(exc.message)
        return []
