"""SearchEpisodes: keyword (FTS5 bm25), semantic (vectors) and hybrid (fused scores).

Each path ranks ids; whole rows and snippets are read once, for the hits
returned: a hybrid search weighs 30 candidates from each path and returns 10,
and reading every candidate's row and snippet was a third of its SQLite time.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence

from nexus_grpc.core.models import EpisodeHit, SearchMode, SearchSource
from nexus_grpc.domain import fts
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.common_terms import ScopeVocabulary, without
from nexus_grpc.domain.ranking import HYBRID_CANDIDATE_FACTOR, fused_scores, hybrid_halves
from nexus_grpc.domain.scope import episode_scope
from nexus_grpc.embedding import Embedder, EmbedderUnavailable
from nexus_grpc.errors import Unavailable
from nexus_grpc.store import Database
from nexus_grpc.store import episodes as episode_store
from nexus_grpc.vectors import Filter, MatchAny, VectorIndex, VectorIndexUnavailable

log = logging.getLogger(__name__)
EPISODES = "episodes"
KEYWORD = (SearchSource.KEYWORD,)
SEMANTIC = (SearchSource.SEMANTIC,)
#: (episode id, score, the paths that found it), best first.
Ranked = list[tuple[int, float, tuple[SearchSource, ...]]]


class EpisodeSearch:
    def __init__(self, db: Database, embedder: Embedder, index: VectorIndex) -> None:
        self.db = db
        self.embedder = embedder
        self.index = index
        self.vocabulary = ScopeVocabulary()

    async def search(
        self,
        query: str,
        session_id: int,
        project_id: int,
        limit: int,
        mode: SearchMode,
        on_degraded: Callable[[str], None] | None = None,
    ) -> AsyncIterator[EpisodeHit]:
        text = v.query(query)
        n = v.search_limit(limit)
        session_ids = await self.db.read_in_transaction(
            lambda c: episode_scope(c, session_id, project_id)
        )
        if not session_ids:
            return
        common = await self.vocabulary.common(
            tuple(sorted(session_ids)),
            lambda size: self.db.read(lambda c: episode_store.scope_sample(c, session_ids, size)),
        )
        match = fts.match_expression(text, drop=common)
        if mode == SearchMode.KEYWORD:
            if match is None:
                return
            # One read: rank, then the rows and snippets of what is returned.
            hits = await self.db.read_in_transaction(
                lambda c: _hits(c, _keyword(c, match, session_ids, n), match, session_ids, n)
            )
        elif mode == SearchMode.SEMANTIC:
            ranked = await self._semantic(without(text, common), session_ids, n)
            hits = await self._read_hits(ranked, None, session_ids, n)
        else:
            keyword, semantic = await hybrid_halves(
                self._keyword(match, session_ids, n * HYBRID_CANDIDATE_FACTOR),
                self._semantic(without(text, common), session_ids, n * HYBRID_CANDIDATE_FACTOR),
                on_degraded,
            )
            found: dict[int, tuple[SearchSource, ...]] = {i: KEYWORD for i, _, _ in keyword}
            for i, _, _ in semantic:
                found[i] = found.get(i, ()) + SEMANTIC
            fused = fused_scores([(i, s) for i, s, _ in keyword], [(i, s) for i, s, _ in semantic])
            # A few spare candidates stand in for rows deleted since they were indexed.
            ranked = [(i, s, found[i]) for i, s in fused[: n + 5]]
            hits = await self._read_hits(ranked, match, session_ids, n)
        for hit in hits:
            yield hit

    async def _keyword(self, match: str | None, session_ids: list[int], n: int) -> Ranked:
        if match is None:
            return []
        return await self.db.read(lambda c: _keyword(c, match, session_ids, n))

    async def _semantic(self, text: str, session_ids: list[int], n: int) -> Ranked:
        try:
            [vector] = await self.embedder.embed([text])
            found = await self.index.search(
                EPISODES,
                vector,
                filter=Filter(must=(MatchAny("sessionId", tuple(session_ids)),)),
                limit=n,
            )
        except (EmbedderUnavailable, VectorIndexUnavailable) as exc:
            raise Unavailable(f"semantic search is unavailable: {exc}") from exc
        return [(h.id, h.score, SEMANTIC) for h in found]

    async def _read_hits(
        self, ranked: Ranked, match: str | None, session_ids: list[int], n: int
    ) -> list[EpisodeHit]:
        if not ranked:
            return []
        return await self.db.read_in_transaction(
            lambda c: _hits(c, ranked, match, session_ids, n)
        )


def _keyword(conn: sqlite3.Connection, match: str, session_ids: list[int], n: int) -> Ranked:
    return [(i, s, KEYWORD) for i, s in episode_store.keyword_search(conn, match, session_ids, n)]


def _hits(
    conn: sqlite3.Connection,
    ranked: Ranked,
    match: str | None,
    session_ids: Sequence[int],
    n: int,
) -> list[EpisodeHit]:
    """The first ``n`` ranked episodes that exist in the scope, with their rows and
    snippets: the index is derived and may briefly hold a point whose row is gone,
    so SQLite has the last word on existence and scope."""
    rows = episode_store.get_many(conn, [i for i, _, _ in ranked])
    allowed = set(session_ids)
    kept = [r for r in ranked if r[0] in rows and rows[r[0]].session_id in allowed][:n]
    matched = [i for i, _, sources in kept if SearchSource.KEYWORD in sources]
    snippets = episode_store.snippets(conn, match, matched) if match and matched else {}
    return [
        EpisodeHit(rows[i], score, snippets.get(i) or _snippet(rows[i].user_message), sources)
        for i, score, sources in kept
    ]


def _snippet(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
