"""How keyword and semantic hits become one ranking, for every search.

Hybrid search fuses scores, not ranks. Reciprocal rank fusion (RRF, k=60),
used before, gives a strong keyword list and a weak semantic list equal say,
so the semantic list's misses pushed good keyword hits down: on the LoCoMo
dev split hybrid ranked below keyword-only at recall@5 (docs/recall.md).
Here each list's scores are put on [0, 1] over the candidates at hand (bm25
divided by the best bm25; cosine min-max scaled) and added with weights that
trust keywords more. A hit one path missed gets 0 from that path.

Scores callers see (SearchHit.score and friends), higher always better:
- keyword: bm25 (FTS5's, sign flipped), unbounded above;
- semantic: cosine similarity, in [-1, 1];
- hybrid: the fused score, in [0, 1].
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nexus_grpc.core.models import SearchSource
from nexus_grpc.errors import Unavailable

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

#: The keyword path's share of a hybrid score; the semantic path has the rest.
#: Tuned on the LoCoMo dev split: recall@10 0.905 at 0.5, 0.919 at 0.6, 0.908
#: at 0.7 (docs/recall.md).
KEYWORD_WEIGHT = 0.6

#: bm25 at or below this carries no signal (FTS5 floors the IDF of a word found
#: in most documents at 1e-6).
MEANINGFUL_BM25 = 1e-3

# Hybrid search fetches this many times the limit from each path, so fusion
# has candidates to reorder.
HYBRID_CANDIDATE_FACTOR = 3
H = TypeVar("H")


@dataclass(frozen=True)
class Fused(Generic[H]):
    """One hybrid hit: its fused score and the hit from each path that found it."""

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


def fused_scores(
    keyword: Sequence[tuple[K, float]], semantic: Sequence[tuple[K, float]]
) -> list[tuple[K, float]]:
    """Each key's hybrid score in [0, 1], best first (ties keep keyword order)."""
    scores: dict[K, float] = {}
    best = max((s for _, s in keyword), default=0.0)
    for key, s in keyword:
        # A best bm25 of ~0 means only words on every document matched: the
        # keyword list then orders nothing and adds nothing.
        scores[key] = KEYWORD_WEIGHT * s / best if best > MEANINGFUL_BM25 else 0.0
    if semantic:
        low = min(s for _, s in semantic)
        spread = max(s for _, s in semantic) - low
        for key, s in semantic:
            scaled = (s - low) / spread if spread > 0 else 1.0
            scores[key] = scores.get(key, 0.0) + (1.0 - KEYWORD_WEIGHT) * scaled
    return sorted(scores.items(), key=lambda item: item[1], reverse=True)


def fuse(
    keyword: Sequence[H],
    semantic: Sequence[H],
    key: Callable[[H], int],
    score: Callable[[H], float],
    limit: int,
) -> list[Fused[H]]:
    """Keyword and semantic hits fused by score, best first."""
    by_keyword = {key(h): h for h in keyword}
    by_semantic = {key(h): h for h in semantic}
    fused = fused_scores(
        [(k, score(h)) for k, h in by_keyword.items()],
        [(k, score(h)) for k, h in by_semantic.items()],
    )
    return [Fused(s, by_keyword.get(k), by_semantic.get(k)) for k, s in fused[:limit]]


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
