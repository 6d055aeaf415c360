"""The page: the first ``limit`` candidates left once every other stage ran."""

from __future__ import annotations

from typing import Any

from nexus_grpc.core.storage import Connection
from nexus_grpc.domain.retrieval.call import Call, Ranked
from nexus_grpc.domain.retrieval.pipeline import Engine, Stage


class Page(Stage):
    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, conn: Connection | None
    ) -> Ranked:
        return ranked[: call.limit]
