"""SearchEpisodes: keyword (FTS5 bm25), semantic (vectors) and hybrid (fused scores).

Each path ranks ids; whole rows and snippets are read once, for the hits
returned: a hybrid search weighs 30 candidates from each path and returns 10,
and reading every candidate's row and snippet was a third of its SQLite time.
"""

from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence

from nexus_grpc.core.models import EpisodeHit, SearchMode, SearchSource, TimeWindow
from nexus_grpc.domain import fts
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.common_terms import ScopeVocabulary, without
from nexus_grpc.domain.ranking import (
    HYBRID_CANDIDATE_FACTOR,
    fused_scores,
    hybrid_halves,
    with_group_cohesion,
    with_keyword_lead,
)
from nexus_grpc.domain.scope import episode_scope
from nexus_grpc.embedding import Embedder, EmbedderUnavailable
from nexus_grpc.errors import Unavailable
from nexus_grpc.store import Database
from nexus_grpc.store import episodes as episode_store
from nexus_grpc.vectors import (
    Cond,
    Filter,
    MatchAny,
    Range,
    VectorIndex,
    VectorIndexUnavailable,
)

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
        window: TimeWindow | None = None,
    ) -> AsyncIterator[EpisodeHit]:
        text = v.query(query)
        n = v.search_limit(limit)
        w = v.time_window(window)
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
                lambda c: _hits(c, _keyword(c, match, session_ids, n, w), match, session_ids, n, w)
            )
        elif mode == SearchMode.SEMANTIC:
            ranked = await self._semantic(without(text, common), session_ids, n, w)
            hits = await self._read_hits(ranked, None, session_ids, n, w)
        else:
            keyword, semantic = await hybrid_halves(
                self._keyword(match, session_ids, n * HYBRID_CANDIDATE_FACTOR, w),
                self._semantic(without(text, common), session_ids, n * HYBRID_CANDIDATE_FACTOR, w),
                on_degraded,
            )
            found: dict[int, tuple[SearchSource, ...]] = {i: KEYWORD for i, _, _ in keyword}
            for i, _, _ in semantic:
                found[i] = found.get(i, ()) + SEMANTIC
            keyword_scores = [(i, s) for i, s, _ in keyword]
            fused = fused_scores(
                keyword_scores,
                [(i, s) for i, s, _ in semantic],
                self.embedder.similarity_temperature,
            )
            if not fused:
                return
            # One read: each candidate's session (for cohesion), then the rows
            # and snippets of what is returned.
            hits = await self.db.read_in_transaction(
                lambda c: _hits(
                    c, _by_session(c, fused, keyword_scores, found, n), match, session_ids, n, w
                )
            )
        for hit in hits:
            yield hit

    async def _keyword(
        self, match: str | None, session_ids: list[int], n: int, window: TimeWindow | None
    ) -> Ranked:
        if match is None:
            return []
        return await self.db.read(lambda c: _keyword(c, match, session_ids, n, window))

    async def _semantic(
        self, text: str, session_ids: list[int], n: int, window: TimeWindow | None = None
    ) -> Ranked:
        must: list[Cond] = [MatchAny("sessionId", tuple(session_ids))]
        if window is not None:
            # occurAt is whole seconds rounded down: a point of second k may hold
            # a time in [start, end) exactly when floor(start) <= k < ceil(end).
            # Only the window's own fractional seconds are left to the exact
            # re-check in _hits, so the index's top n are (nearly all) kept.
            must.append(
                Range(
                    "occurAt",
                    gte=None if window.start is None else math.floor(window.start),
                    lte=None if window.end is None else math.ceil(window.end) - 1,
                )
            )
        try:
            vector = await self.embedder.embed_query(text)
            found = await self.index.search(
                EPISODES,
                vector,
                filter=Filter(must=tuple(must)),
                limit=n,
            )
        except (EmbedderUnavailable, VectorIndexUnavailable) as exc:
            raise Unavailable(f"semantic search is unavailable: {exc}") from exc
        return [(h.id, h.score, SEMANTIC) for h in found]

    async def _read_hits(
        self,
        ranked: Ranked,
        match: str | None,
        session_ids: list[int],
        n: int,
        window: TimeWindow | None = None,
    ) -> list[EpisodeHit]:
        if not ranked:
            return []
        return await self.db.read_in_transaction(
            lambda c: _hits(c, ranked, match, session_ids, n, window)
        )


def _keyword(
    conn: sqlite3.Connection,
    match: str,
    session_ids: list[int],
    n: int,
    window: TimeWindow | None = None,
) -> Ranked:
    found = episode_store.keyword_search(conn, match, session_ids, n, window)
    return [(i, s, KEYWORD) for i, s in found]


def _by_session(
    conn: sqlite3.Connection,
    fused: list[tuple[int, float]],
    keyword: list[tuple[int, float]],
    found: dict[int, tuple[SearchSource, ...]],
    n: int,
) -> Ranked:
    """Fused candidates re-ranked with their sessions' cohesion, then the
    keyword path's best hit first if it is near the top (ranking.py)."""
    sessions = episode_store.sessions_of(conn, [i for i, _ in fused])
    # A candidate whose row is gone gets a group of its own; _hits drops it.
    ranked = with_keyword_lead(with_group_cohesion(fused, lambda i: sessions.get(i, -i)), keyword)
    # A few spare candidates stand in for rows deleted since they were indexed.
    return [(i, s, found[i]) for i, s in ranked[: n + 5]]


def _hits(
    conn: sqlite3.Connection,
    ranked: Ranked,
    match: str | None,
    session_ids: Sequence[int],
    n: int,
    window: TimeWindow | None = None,
) -> list[EpisodeHit]:
    """The first ``n`` ranked episodes that exist in the scope, with their rows and
    snippets: the index is derived and may briefly hold a point whose row is gone,
    so SQLite has the last word on existence and scope."""
    rows = episode_store.get_many(conn, [i for i, _, _ in ranked])
    allowed = set(session_ids)
    kept = [
        r
        for r in ranked
        if r[0] in rows
        and rows[r[0]].session_id in allowed
        and (window is None or window.holds(rows[r[0]].occur_at))
    ][:n]
    matched = [i for i, _, sources in kept if SearchSource.KEYWORD in sources]
    snippets = episode_store.snippets(conn, match, matched) if match and matched else {}
    return [
        EpisodeHit(rows[i], score, snippets.get(i) or _snippet(rows[i].user_message), sources)
        for i, score, sources in kept
    ]


def _snippet(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
