"""The keyword path of each kind: words, not meaning.

- episodes: FTS5 bm25 over each exchange and its neighbouring turns, within
  the scope's sessions and the searched window (store/episodes.py);
- memories: FTS5 bm25 confined to the owners' postings and the visibility rule;
- entities: the entities the query names, by any of their names (a word, or
  two or three in a row), scored by the words of the longest name matched.

Scores are raw (bm25 with higher better; words matched); fusion turns them
into likelihoods relative to the best (KEYWORD_TEMPERATURE).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from nexus_grpc.core.graph import Entity
from nexus_grpc.core.models import SearchSource
from nexus_grpc.core.names import display_form, search_key
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain.retrieval import keyword_query
from nexus_grpc.domain.retrieval.call import Call, Candidate, Ranked
from nexus_grpc.domain.retrieval.pipeline import Engine, Path
from nexus_grpc.domain.retrieval.ranking import KEYWORD_TEMPERATURE, MEANINGFUL_BM25

FOUND_BY = (SearchSource.KEYWORD,)


class _Keyword(Path):
    source: ClassVar[SearchSource] = SearchSource.KEYWORD
    floor: ClassVar[float | None] = MEANINGFUL_BM25
    no_match: ClassVar[str | None] = "no query word matched"

    def temperature(self, engine: Engine[Any]) -> float:
        return KEYWORD_TEMPERATURE


class EpisodeKeyword(_Keyword):
    ranks_in_read = True

    def skips(self, call: Call) -> bool:
        return call.scope.match is None

    async def find(self, engine: Engine[Any], call: Call, n: int) -> Ranked:
        if self.skips(call):
            return []
        return await engine.db.read(lambda c: self.find_in(c, engine, call, n))

    def find_in(self, uow: UnitOfWork, engine: Engine[Any], call: Call, n: int) -> Ranked:
        s = call.scope
        found = uow.episodes.keyword_search(s.match, s.session_ids, n, s.searched)
        return [Candidate(i, score, FOUND_BY) for i, score in found]

    async def matching(self, engine: Engine[Any], call: Call, keys: Sequence[int]) -> set[int]:
        match = call.scope.match
        if match is None:
            return set()
        return await engine.db.read(lambda c: c.episodes.keyword_matching(match, keys))


class MemoryKeyword(_Keyword):
    def skips(self, call: Call) -> bool:
        return call.scope.match is None

    async def find(self, engine: Engine[Any], call: Call, n: int) -> Ranked:
        s = call.scope
        if s.match is None:
            return []
        found = await engine.db.read(
            lambda c: c.memories.keyword_search(s.match, s.scope, n, at=s.now)
        )
        return [Candidate(m.id, score, FOUND_BY, row=m) for m, score in found]

    async def matching(self, engine: Engine[Any], call: Call, keys: Sequence[int]) -> set[int]:
        match = call.scope.match
        if match is None:
            return set()
        return await engine.db.read(lambda c: c.memories.keyword_matching(match, keys))


class EntityNames(_Keyword):
    no_match: ClassVar[str | None] = "the query names none of its names"

    async def find(self, engine: Engine[Any], call: Call, n: int) -> Ranked:
        project_id, session_id = call.scope
        words = search_key(call.text).split()
        phrases = {
            " ".join(words[i : i + size])
            for size in (1, 2, 3)
            for i in range(len(words) - size + 1)
        }
        phrases -= keyword_query.STOPWORDS
        entities = await engine.db.read(
            lambda c: c.graph.entities_named(project_id, session_id, sorted(phrases), n)
        )
        # Scored by the longest of its names the query holds: "Priya Raman"
        # over "Priya" for a query naming both.
        return sorted(
            (Candidate(e.id, _named_score(e, phrases), FOUND_BY, row=e) for e in entities),
            key=lambda c: -c.score,
        )


def _named_score(e: Entity, phrases: set[str]) -> float:
    words = [
        len(search_key(display_form(n, e.type)).split())
        for n in (e.name, *e.aliases)
        if search_key(display_form(n, e.type)) in phrases
    ]
    return float(max(words, default=len(e.name.split())))
