"""The page: the first ``limit`` candidates left once every other stage ran."""

from __future__ import annotations

from typing import Any

from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain.retrieval.call import Call, Ranked
from nexus_grpc.domain.retrieval.pipeline import Engine, Stage


class Page(Stage):
    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        return ranked[: call.limit]
