"""The room's three doors: one entry point per searched kind.

``EpisodeSearch`` (SearchEpisodes), ``MemorySearch`` (SearchMemories, and the
single paths formation and selection read similar memories through) and
``EntitySearch`` (SearchEntities) each validate a request into a ``Call`` and
run their kind's recipe (recipes.py) through the one dispatcher
(pipeline.Engine). Nothing outside this package ranks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from nexus_grpc.core.models import MemoryScope, SearchMode, TimeWindow
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.retrieval import recipes
from nexus_grpc.domain.retrieval.call import Call
from nexus_grpc.domain.retrieval.entity_kind import GraphRequest
from nexus_grpc.domain.retrieval.episode_kind import EpisodeRequest
from nexus_grpc.domain.retrieval.explain_recorder import runner_for
from nexus_grpc.domain.retrieval.hits import EntityHit, EpisodeHit, MemoryHit
from nexus_grpc.domain.retrieval.memory_kind import search_scope
from nexus_grpc.domain.retrieval.pipeline import Engine, Path
from nexus_grpc.embedding import Embedder
from nexus_grpc.rerank import Reranker
from nexus_grpc.vectors import VectorIndex

OnDegraded = Callable[[str], None]


class EpisodeSearch:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        index: VectorIndex,
        reranker: Reranker | None = None,
    ) -> None:
        self.engine: Engine[EpisodeHit] = Engine(recipes.EPISODES, db, embedder, index, reranker)

    async def search(
        self,
        query: str,
        session_id: int,
        project_id: int,
        limit: int,
        mode: SearchMode,
        on_degraded: OnDegraded | None = None,
        window: TimeWindow | None = None,
        *,
        rerank: bool = True,
        explain: bool = False,
    ) -> AsyncIterator[EpisodeHit]:
        """The best ``limit`` episodes the session (or project) may see, best
        first; ``rerank=False`` leaves out the reranker (the fused order);
        ``explain``: each hit says what each stage made of it."""
        call = Call(
            v.query(query),
            v.search_limit(limit),
            mode,
            EpisodeRequest(session_id, project_id, window),
            rerank=rerank,
            on_degraded=on_degraded,
            explain=explain,
        )
        async for hit in self.engine.search(call, runner_for(call)):
            yield hit


class MemorySearch:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        index: VectorIndex,
        reranker: Reranker | None = None,
    ) -> None:
        self.engine: Engine[MemoryHit] = Engine(recipes.MEMORIES, db, embedder, index, reranker)

    async def search(
        self,
        query: str,
        scope: MemoryScope,
        limit: int,
        mode: SearchMode,
        on_degraded: OnDegraded | None = None,
        *,
        rerank: bool = True,
        explain: bool = False,
    ) -> AsyncIterator[MemoryHit]:
        """The best ``limit`` memories ``scope`` may see, best first."""
        call = Call(
            v.query(query),
            v.search_limit(limit),
            mode,
            scope,
            rerank=rerank,
            on_degraded=on_degraded,
            explain=explain,
        )
        async for hit in self.engine.search(call, runner_for(call)):
            yield hit

    async def keyword(self, text: str, scope: MemoryScope, n: int) -> list[MemoryHit]:
        """The keyword path alone: ``n`` memories by bm25 (formation's
        similar memories)."""
        return await self._path(recipes.MEMORIES.paths_for(SearchMode.KEYWORD)[0], text, scope, n)

    async def semantic(self, text: str, scope: MemoryScope, n: int) -> list[MemoryHit]:
        """The vector path alone: ``n`` memories by meaning (formation's
        similar memories, selection's fallback)."""
        return await self._path(recipes.MEMORIES.paths_for(SearchMode.SEMANTIC)[0], text, scope, n)

    async def _path(self, path: Path, text: str, scope: MemoryScope, n: int) -> list[MemoryHit]:
        call = Call(text, n, SearchMode.KEYWORD, scope)
        call.scope = await search_scope(self.engine, text, scope)
        found = await path.find(self.engine, call, n)
        return [MemoryHit(c.row, c.score, c.sources) for c in found]


class EntitySearch:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        index: VectorIndex,
        reranker: Reranker | None = None,
    ) -> None:
        self.engine: Engine[EntityHit] = Engine(recipes.ENTITIES, db, embedder, index, reranker)

    async def search(
        self,
        query: str,
        project_id: int,
        limit: int,
        *,
        session_id: int = 0,
        rerank: bool = True,
        explain: bool = False,
    ) -> AsyncIterator[EntityHit]:
        """The entities of one graph the query names or means, best first."""
        call = Call(
            v.query(query),
            v.search_limit(limit),
            SearchMode.HYBRID,
            GraphRequest(project_id, session_id),
            rerank=rerank,
            explain=explain,
        )
        async for hit in self.engine.search(call, runner_for(call)):
            yield hit
