"""SearchEpisodes: keyword (FTS5 bm25), semantic (vectors) and hybrid (fused scores)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Callable

from nexus_grpc.domain import fts
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.common_terms import ScopeVocabulary, without
from nexus_grpc.domain.models import EpisodeHit, SearchMode, SearchSource
from nexus_grpc.domain.ranking import HYBRID_CANDIDATE_FACTOR, fuse, hybrid_halves
from nexus_grpc.domain.scope import episode_scope
from nexus_grpc.embedding import Embedder, EmbedderUnavailable
from nexus_grpc.errors import Unavailable
from nexus_grpc.store import Database
from nexus_grpc.store import episodes as episode_store
from nexus_grpc.vectors import Filter, MatchAny, VectorIndex, VectorIndexUnavailable

log = logging.getLogger(__name__)
EPISODES = "episodes"


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
        if mode == SearchMode.KEYWORD:
            for hit in await self._keyword(text, common, session_ids, n):
                yield hit
            return
        if mode == SearchMode.SEMANTIC:
            for hit in await self._semantic(without(text, common), session_ids, n):
                yield hit
            return
        keyword, semantic = await hybrid_halves(
            self._keyword(text, common, session_ids, n * HYBRID_CANDIDATE_FACTOR),
            self._semantic(without(text, common), session_ids, n * HYBRID_CANDIDATE_FACTOR),
            on_degraded,
        )
        for f in fuse(keyword, semantic, lambda h: h.episode.id, lambda h: h.score, n):
            # The keyword path's snippet shows where the words matched.
            yield EpisodeHit(f.hit.episode, f.score, f.hit.snippet, f.sources)

    async def _keyword(
        self, text: str, common: frozenset[str], session_ids: list[int], n: int
    ) -> list[EpisodeHit]:
        match = fts.match_expression(text, drop=common)
        if match is None:
            return []

        def read(conn: sqlite3.Connection) -> list[EpisodeHit]:
            found = episode_store.keyword_search(conn, match, session_ids, n)
            ids = [i for i, _ in found]
            rows = episode_store.get_many(conn, ids)
            # Snippets only for the hits returned, not for every match ranked.
            snippets = episode_store.snippets(conn, match, ids)
            return [
                EpisodeHit(rows[i], score, snippets.get(i, ""), (SearchSource.KEYWORD,))
                for i, score in found
                if i in rows
            ]

        return await self.db.read_in_transaction(read)

    async def _semantic(self, text: str, session_ids: list[int], n: int) -> list[EpisodeHit]:
        try:
            [vector] = await self.embedder.embed([text])
            hits = await self.index.search(
                EPISODES,
                vector,
                filter=Filter(must=(MatchAny("sessionId", tuple(session_ids)),)),
                limit=n,
            )
        except (EmbedderUnavailable, VectorIndexUnavailable) as exc:
            raise Unavailable(f"semantic search is unavailable: {exc}") from exc
        ids = [h.id for h in hits]
        rows = await self.db.read(lambda c: episode_store.get_many(c, ids))
        allowed = set(session_ids)
        # The index is derived and may briefly hold a point whose row is gone or
        # whose session moved; SQLite has the last word on existence and scope.
        return [
            EpisodeHit(
                rows[h.id], h.score, _snippet(rows[h.id].user_message), (SearchSource.SEMANTIC,)
            )
            for h in hits
            if h.id in rows and rows[h.id].session_id in allowed
        ]


def _snippet(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
