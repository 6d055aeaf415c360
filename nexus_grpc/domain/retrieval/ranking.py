"""How keyword and semantic hits become one ranking, for every search.

Hybrid search fuses scores, not ranks. Reciprocal rank fusion (RRF, k=60),
used at first, gives a strong keyword list and a weak semantic list equal say,
so the semantic list's misses pushed good keyword hits down: on the LoCoMo
dev split hybrid ranked below keyword-only at recall@5 (docs/recall.md).

Each path's score becomes a likelihood relative to that path's best hit,
exp((score - best) / temperature), and the two are added with weights that
trust keywords more. bm25 is a sum of log-odds of relevance, so a hit 2 bm25
points behind the best is e^-1 as likely; cosine similarity is scaled the same
way with a temperature fitted to MiniLM's spread (a hit 0.05 behind: e^-1).
Unlike scaling each list onto [0, 1] by its own best and worst candidates,
this keeps a decisive lead decisive and a near tie a near tie, whatever the
worst candidate happened to score. A hit one path missed gets 0 from it.

Episodes are then ranked with their conversation's weight: evidence sits
in sessions where several turns match (see ``with_group_cohesion``). Last,
the keyword path's own best hit goes first when fusion ranks it among its
top few (see ``with_keyword_lead``): fusion must not rank below the best
single signal it fuses, and at the first place that signal is bm25's.

Scores callers see (SearchHit.score and friends), higher always better, are
set by the last stage (retrieval/scores.py), after the ranking:
- keyword: bm25 (FTS5's, sign flipped) through a logistic, in [0.5, 1) for a
  match;
- semantic: cosine similarity, in [-1, 1];
- hybrid: the fused score, in (0, 1].
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from nexus_grpc.errors import Unavailable

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

#: The keyword path's share of a hybrid score; the semantic path has the rest.
#: Tuned on the LoCoMo dev split (docs/recall.md has the grid).
KEYWORD_WEIGHT = 0.6

#: bm25 points behind the best keyword hit that cost a factor of e.
KEYWORD_TEMPERATURE = 2.0

#: Cosine similarity behind the best semantic hit that costs a factor of e,
#: unless the embedder says otherwise (Embedder.similarity_temperature).
SEMANTIC_TEMPERATURE = 0.05

#: How much a hit's group (an episode's session) adds, relative to the best
#: group among the candidates; see with_group_cohesion.
GROUP_COHESION_WEIGHT = 0.2

#: The keyword path's best hit goes first when fusion ranks it this high or
#: higher; see with_keyword_lead.
KEYWORD_LEAD_WITHIN = 3

#: bm25 at or below this carries no signal (FTS5 floors the IDF of a word found
#: in most documents at 1e-6).
MEANINGFUL_BM25 = 1e-3

# Hybrid search fetches this many times the limit from each path, so fusion
# has candidates to reorder.
HYBRID_CANDIDATE_FACTOR = 3
H = TypeVar("H")


@dataclass(frozen=True)
class PathScores(Generic[K]):
    """One candidate path's hits as fusion weighs them: (key, raw score) best
    first, the path's share of the fused score, and the raw-score distance
    from its best hit that costs a factor of e. A list whose best score is at
    or below ``floor`` orders nothing and adds nothing (bm25's ubiquitous words)."""

    hits: Sequence[tuple[K, float]]
    weight: float
    temperature: float
    floor: float | None = None


def fused_likelihoods(paths: Sequence[PathScores[K]]) -> list[tuple[K, float]]:
    """Each key's fused score: the sum over the paths that found it of
    weight x exp((score - that path's best) / temperature), best first; ties
    keep the order the keys were first met in (the first path's first)."""
    scores: dict[K, float] = {}
    for path in paths:
        best = max((s for _, s in path.hits), default=0.0)
        if path.floor is not None and best <= path.floor:
            for key, _ in path.hits:
                scores[key] = scores.get(key, 0.0) + 0.0
            continue
        for key, s in path.hits:
            likely = math.exp((s - best) / path.temperature)
            scores[key] = scores.get(key, 0.0) + path.weight * likely
    return sorted(scores.items(), key=lambda item: item[1], reverse=True)


def with_group_cohesion(
    scored: Sequence[tuple[K, float]], group: Callable[[K], Hashable]
) -> list[tuple[K, float]]:
    """``scored`` re-ranked with each hit's group: a hit whose group (for an
    episode, its session) holds other strong candidates moves up, best first.

    In a long conversation the evidence for a question sits in the session
    where it was discussed, and that session usually has two or more turns that
    match; a stray turn elsewhere that shares one word rarely has company. Each
    group's strength is the mean of its two best scores (a lone candidate counts
    half), relative to the strongest group; it adds GROUP_COHESION_WEIGHT of that,
    and the sum is scaled back onto [0, 1]. When every candidate is in one group
    (a session-scoped search) the order is unchanged. On the LoCoMo dev split:
    recall@5 +0.02, recall@10 +0.005 (docs/recall.md)."""
    tops: dict[Hashable, list[float]] = {}
    for key, s in scored:
        best_two = tops.setdefault(group(key), [])
        if len(best_two) < 2:
            best_two.append(s)  # scored is best first, so the first two are the best
    strength = {g: sum(two) / 2 for g, two in tops.items()}
    strongest = max(strength.values(), default=0.0)
    if strongest <= 0:
        return list(scored)
    rescored = [
        (
            key,
            (s + GROUP_COHESION_WEIGHT * strength[group(key)] / strongest)
            / (1.0 + GROUP_COHESION_WEIGHT),
        )
        for key, s in scored
    ]
    return sorted(rescored, key=lambda item: item[1], reverse=True)


def with_keyword_lead(
    ranked: Sequence[tuple[K, float]], keyword: Sequence[tuple[K, float]]
) -> list[tuple[K, float]]:
    """``ranked`` (fused, best first) with the keyword path's best hit first when
    fusion put it among its top KEYWORD_LEAD_WITHIN; it takes the first place's
    score, so scores still read best first.

    Fusion lifts recall at 5 and 10 by letting both paths vote, but at the first
    place bm25's own best hit is right more often than any blend: on each of the
    three LoCoMo dev conversations, fused recall@1 was 0.010-0.020 below
    keyword-only's while recall@5 and @10 were above it. Only a near-tie is
    reordered: a keyword best that fusion ranks lower than that (the semantic
    path disagrees strongly, or the bm25 lead was a common word's) stays where
    fusion put it. With this, recall@1 equals keyword-only's on every dev
    conversation and recall@5 and @10 are unchanged (docs/recall.md)."""
    if not ranked or not keyword:
        return list(ranked)
    best, bm25 = max(keyword, key=lambda item: item[1])
    if bm25 <= MEANINGFUL_BM25:
        return list(ranked)
    head = [key for key, _ in ranked[:KEYWORD_LEAD_WITHIN]]
    if best not in head or head[0] == best:
        return list(ranked)
    top = ranked[0][1]
    return [(best, top)] + [(key, s) for key, s in ranked if key != best]


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
