"""Hybrid fusion: every path's candidates become one ranking.

Each path's raw scores become likelihoods relative to its own best hit and
are added with the recipe's weights (``ranking.fused_likelihoods``; the
reasons and figures are in ranking.py and docs/recall.md). A hit records
every path that found it, and keeps the row the first of them read."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from nexus_grpc.core.models import SearchSource
from nexus_grpc.domain.ranking import PathScores, fused_likelihoods
from nexus_grpc.domain.retrieval.call import Call, Candidate, Ranked
from nexus_grpc.domain.retrieval.pipeline import Engine, Stage


class Fusion(Stage):
    def __init__(self, weights: Mapping[SearchSource, float]) -> None:
        #: Each path's share of a fused score, by the source it reports.
        self.weights = dict(weights)

    def applies(self, engine: Engine[Any], call: Call) -> bool:
        return len(engine.recipe.paths_for(call.mode)) > 1

    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, conn: sqlite3.Connection | None
    ) -> Ranked:
        sources: dict[int, tuple[SearchSource, ...]] = {}
        rows: dict[int, Any] = {}
        lists = []
        for path in engine.recipe.paths_for(call.mode):
            seen: dict[int, float] = {}
            for c in call.found.get(path.source, []):
                if c.key in seen:
                    continue
                seen[c.key] = c.score
                sources[c.key] = sources.get(c.key, ()) + (path.source,)
                if rows.get(c.key) is None:
                    rows[c.key] = c.row
            lists.append(
                PathScores(
                    list(seen.items()),
                    self.weights[path.source],
                    path.temperature(engine),
                    path.floor,
                )
            )
        return [
            Candidate(key, score, sources[key], rows[key])
            for key, score in fused_likelihoods(lists)
        ]
