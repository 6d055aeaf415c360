"""The keyword path's best hit goes first when fusion ranked it among its top
few (``ranking.with_keyword_lead``: at the first place bm25 is the most
precise single signal; docs/recall.md has the figures)."""

from __future__ import annotations

from typing import Any

from nexus_grpc.core.models import SearchSource
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain.retrieval import explain
from nexus_grpc.domain.retrieval.call import Call, Ranked, rescored
from nexus_grpc.domain.retrieval.pipeline import Engine, Stage
from nexus_grpc.domain.retrieval.ranking import with_keyword_lead


class KeywordLead(Stage):
    # The last of fusion's steps (fusion, session cohesion, this): the fused order.
    explains = explain.FUSED

    def applies(self, engine: Engine[Any], call: Call) -> bool:
        return len(engine.recipe.paths_for(call.mode)) > 1

    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        keyword = call.raw.get(SearchSource.KEYWORD, [])  # bm25's own scores, as fused
        return rescored(ranked, with_keyword_lead([(c.key, c.score) for c in ranked], keyword))
