"""SearchEpisodes: keyword (FTS5 bm25), semantic (vectors) and hybrid (fused
scores, optionally reranked), through the one retrieval pipeline
(domain/retrieval/, the EPISODES recipe).

Scope, the request's time window and the project's retention are resolved
and filtered inside the pipeline, before the page is cut.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from nexus_grpc.core.models import EpisodeHit, SearchMode, TimeWindow
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.retrieval import EPISODES, Call, Engine, EpisodeRequest
from nexus_grpc.embedding import Embedder
from nexus_grpc.rerank import Reranker
from nexus_grpc.vectors import VectorIndex


class EpisodeSearch:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        index: VectorIndex,
        reranker: Reranker | None = None,
    ) -> None:
        self.engine: Engine[EpisodeHit] = Engine(EPISODES, db, embedder, index, reranker)

    async def search(
        self,
        query: str,
        session_id: int,
        project_id: int,
        limit: int,
        mode: SearchMode,
        on_degraded: Callable[[str], None] | None = None,
        window: TimeWindow | None = None,
        *,
        rerank: bool = True,
    ) -> AsyncIterator[EpisodeHit]:
        """The best ``limit`` episodes the session (or project) may see, best
        first; ``rerank=False`` leaves out the reranker (the fused order)."""
        call = Call(
            v.query(query),
            v.search_limit(limit),
            mode,
            EpisodeRequest(session_id, project_id, window),
            rerank=rerank,
            on_degraded=on_degraded,
        )
        async for hit in self.engine.search(call):
            yield hit
