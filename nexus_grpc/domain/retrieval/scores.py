"""Scores as callers read them (``SearchHit.score`` and friends): higher is
better, and a hit a path matched never scores 0.

The ranking is done when this runs (it is the last stage, after the page is
cut) and it changes scores only, never the order, so recall cannot move.

- Keyword mode, episodes and memories: bm25 (FTS5's, or PostgreSQL's) goes
  through a logistic, ``1 / (1 + e^(-bm25 / 4))``, into (0, 1). bm25 itself
  is about 0 on a small project: FTS5 floors the IDF of a word found in half
  the documents or more at 1e-6, so on a project of two or three exchanges
  every match scored 0.000002 (shown as 0.0). The logistic keeps bm25's order
  and its meaning (each 4 bm25 points multiply the odds by e; 0.5 is bm25 0,
  a match of words on most of the scope; a strong match nears 1).
- Entities' keyword mode scores the words of the longest name matched (1 or
  more): left as it is.
- Hybrid: the fused score in (0, 1]. When every keyword hit matched only
  words on most of the scope (bm25 at or below ``MEANINGFUL_BM25``), the
  keyword list orders nothing and adds 0 to each fused score (ranking.py), so
  a hit only it found scored 0 after every hit the semantic path found. Such
  hits keep their place and score between 0 and the lowest score above them,
  in decreasing steps. Reranked hits keep the reranker's score.
"""

from __future__ import annotations

import math
from typing import Any

from nexus_grpc.core.models import SearchMode
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain.retrieval.call import Call, Ranked
from nexus_grpc.domain.retrieval.pipeline import Engine, Stage
from nexus_grpc.domain.retrieval.ranking import KEYWORD_WEIGHT

#: bm25 points that multiply a keyword hit's odds by e in its shown score.
KEYWORD_SCORE_SCALE = 4.0


def keyword_score(bm25: float) -> float:
    """bm25 as a keyword-mode hit shows it: in (0, 1), increasing, 0.5 at 0."""
    # Written for both signs so that a large |bm25| never overflows exp().
    if bm25 >= 0:
        return 1.0 / (1.0 + math.exp(-bm25 / KEYWORD_SCORE_SCALE))
    odds = math.exp(bm25 / KEYWORD_SCORE_SCALE)
    return odds / (1.0 + odds)


def lifted_tail(scores: list[float]) -> list[float]:
    """``scores`` (best first) with the zero or negative tail a fused ranking
    leaves for hits only a signal-less keyword list found raised above 0: each
    between 0 and the lowest positive score before it, decreasing, so the
    order reads the same. With no positive score at all, the tail steps down
    from the share a keyword hit has in a fused score."""
    tail = [i for i, s in enumerate(scores) if s <= 0]
    if not tail:
        return list(scores)
    ceiling = min((s for s in scores if s > 0), default=KEYWORD_WEIGHT)
    out = list(scores)
    steps = len(tail) + 1
    for n, i in enumerate(tail):
        out[i] = ceiling * (steps - 1 - n) / steps
    return out


class CallerScores(Stage):
    """The last stage of every recipe: turns ranking scores into shown ones.

    ``bm25``: the kind's keyword path scores with bm25 (episodes, memories),
    so its keyword-mode scores are mapped (``keyword_score``)."""

    def __init__(self, *, bm25: bool) -> None:
        self.bm25 = bm25

    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        if len(engine.recipe.paths_for(call.mode)) > 1:
            fused = [c for c in ranked if not c.reranked]
            # Only a trailing run can be 0: fused scores are sorted, reranked
            # ones come first.
            for candidate, score in zip(fused, lifted_tail([c.score for c in fused]), strict=True):
                candidate.score = score
        elif call.mode == SearchMode.KEYWORD and self.bm25:
            for candidate in ranked:
                candidate.score = keyword_score(candidate.score)
        return ranked
