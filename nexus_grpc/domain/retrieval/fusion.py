"""Hybrid fusion: every path's candidates become one ranking.

Each path's raw scores become likelihoods relative to its own best hit and
are added with the recipe's weights (``ranking.fused_likelihoods``; the
reasons and figures are in ranking.py and docs/recall.md). A hit records
every path that found it, and keeps the row the first of them read. Paths
rank distinct keys; a key one path names twice counts at its first rank."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nexus_grpc.core.models import SearchSource
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain.retrieval.call import Call, Candidate, Ranked
from nexus_grpc.domain.retrieval.pipeline import Engine, Stage
from nexus_grpc.domain.retrieval.ranking import PathScores, fused_likelihoods


class Fusion(Stage):
    def __init__(self, weights: Mapping[SearchSource, float]) -> None:
        #: Each path's share of a fused score, by the source it reports.
        self.weights = dict(weights)

    def applies(self, engine: Engine[Any], call: Call) -> bool:
        return len(engine.recipe.paths_for(call.mode)) > 1

    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        # The first path's candidate for a key stands for it (keeping the first
        # row read); later paths add their source to it.
        first: dict[int, Candidate] = {}
        lists = []
        for path in engine.recipe.paths_for(call.mode):
            source = path.source
            pairs = []
            for c in call.found.get(source, []):
                known = first.get(c.key)
                if known is None:
                    first[c.key] = c
                elif source in known.sources:
                    continue  # a path that named a key twice: its first rank counts
                else:
                    known.sources = (*known.sources, source)
                    if known.row is None:
                        known.row = c.row
                pairs.append((c.key, c.score))
            call.raw[source] = pairs
            lists.append(
                PathScores(pairs, self.weights[source], path.temperature(engine), path.floor)
            )
        fused = []
        for key, score in fused_likelihoods(lists):
            candidate = first[key]
            candidate.score = score
            fused.append(candidate)
        return fused
