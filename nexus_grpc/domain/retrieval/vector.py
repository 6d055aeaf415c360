"""The vector path of each kind: meaning, not words.

The query (less the scope's common words, for episodes and memories) is
embedded and searched with the scope as the index's filter. The index is
derived: memories and entities read their rows here and SQLite has the last
word on existence and scope; episodes leave rows to the hydrate stage. A
backend that is down is UNAVAILABLE (a hybrid search then goes on without
this path, and says so).

A nearest neighbour is not a match: in a project of three exchanges the
third nearest to "which port is the database on" was "I prefer short
answers", at cosine -0.029. A candidate below the embedder's
``similarity_floor`` matched nothing and is left out (explain says so); a
hit another path found stays, found by that path alone.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from nexus_grpc.core.models import SearchSource
from nexus_grpc.domain.retrieval import explain
from nexus_grpc.domain.retrieval.call import Call, Candidate, Ranked
from nexus_grpc.domain.retrieval.explain import Trace
from nexus_grpc.domain.retrieval.pipeline import Engine, Path
from nexus_grpc.errors import DependencyError, Unavailable
from nexus_grpc.vectors import Cond, Filter, MatchAny, Range

FOUND_BY = (SearchSource.SEMANTIC,)
EPISODES = "episodes"
MEMORIES = "memories"
ENTITIES = "entities"


class _Vector(Path):
    source: ClassVar[SearchSource] = SearchSource.SEMANTIC
    #: How an outage reads in errors and degraded_reason.
    unavailable: ClassVar[str] = "semantic search is unavailable"

    def temperature(self, engine: Engine[Any]) -> float:
        return engine.embedder.similarity_temperature

    async def _search(
        self, engine: Engine[Any], call: Call, collection: str, text: str, flt: Filter, n: int
    ) -> list[Any]:
        """The index's nearest ``n``, less those below the embedder's floor."""
        try:
            vector = await engine.embedder.embed_query(text)
            found = await engine.index.search(collection, vector, filter=flt, limit=n)
        except DependencyError as exc:  # the embedder or the index
            raise Unavailable(f"{self.unavailable}: {exc}") from exc
        floor = engine.embedder.similarity_floor
        call.below_floor[self.source] = [(hit.id, hit.score) for hit in found if hit.score < floor]
        # Equals newest first, as the keyword path orders them: the index's own
        # order of equal scores follows its layout, which every write moves.
        kept = [hit for hit in found if hit.score >= floor]
        return sorted(kept, key=lambda hit: (-hit.score, -hit.id))

    def explain_found(self, engine: Engine[Any], call: Call, trace: Trace) -> None:
        """The nearest neighbours left out below the embedder's floor."""
        floor = engine.embedder.similarity_floor
        for key, score in call.below_floor.get(self.source, []):
            trace.missed(
                explain.SEMANTIC,
                key,
                f"cosine {score:.3f}, below {floor:g}: its meaning matched nothing",
            )


class EpisodeVector(_Vector):
    async def find(self, engine: Engine[Any], call: Call, n: int) -> Ranked:
        s = call.scope
        must: list[Cond] = [MatchAny("sessionId", tuple(s.session_ids))]
        window = s.searched
        if window is not None:
            # occurAt is whole seconds rounded down: a point of second k may hold
            # a time in [start, end) exactly when floor(start) <= k < ceil(end).
            # Only the window's own fractional seconds are left to the exact
            # filters, so the index's top n are (nearly all) kept.
            must.append(
                Range(
                    "occurAt",
                    gte=None if window.start is None else math.floor(window.start),
                    lte=None if window.end is None else math.ceil(window.end) - 1,
                )
            )
        text = s.semantic_text(call.text)
        found = await self._search(engine, call, EPISODES, text, Filter(must=tuple(must)), n)
        return [Candidate(h.id, h.score, FOUND_BY) for h in found]


class MemoryVector(_Vector):
    async def find(self, engine: Engine[Any], call: Call, n: int) -> Ranked:
        s = call.scope
        flt = s.vector_filter
        if flt is None:
            return []
        hits = await self._search(engine, call, MEMORIES, s.semantic_text(call.text), flt, n)
        ids = [h.id for h in hits]
        rows = await engine.db.read(lambda c: c.memories.get_visible(ids, s.scope, at=s.now))
        return [Candidate(h.id, h.score, FOUND_BY, row=rows[h.id]) for h in hits if h.id in rows]


class EntityVector(_Vector):
    unavailable = "entity search is unavailable"

    async def find(self, engine: Engine[Any], call: Call, n: int) -> Ranked:
        graph = call.scope
        project_id, session_id = graph
        flt = Filter(
            must=(MatchAny("projectId", (project_id,)), MatchAny("sessionId", (session_id,)))
        )
        hits = await self._search(engine, call, ENTITIES, call.text, flt, n)
        rows = await engine.db.read(lambda c: c.graph.get_entities([h.id for h in hits]))
        return [
            Candidate(h.id, h.score, FOUND_BY, row=rows[h.id])
            for h in hits
            if h.id in rows and (rows[h.id].project_id, rows[h.id].session_id) == graph
        ]
