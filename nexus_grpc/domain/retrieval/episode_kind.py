"""Episodes (SearchEpisodes): the project isolation scope (retrieval/episode_scope.py),
the request's time window and the project's retention, resolved once per call.

Retention is a filter like the window: the paths search only what the
project still keeps (the window's start moved up to the cutoff), and every
row is checked against both before the page is cut, so a page is never short
because some hits were past retention.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from nexus_grpc.core.models import Episode, TimeWindow
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.retrieval import keyword_query
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.common_terms import without
from nexus_grpc.domain.retrieval.episode_scope import episode_scope
from nexus_grpc.domain.retrieval.hits import EpisodeHit
from nexus_grpc.domain.retrieval.pipeline import Engine

#: The longest snippet made from a hit's own text when no keyword matched it.
SNIPPET_CHARS = 160


@dataclass(frozen=True)
class EpisodeRequest:
    """The asking session (it sees its own episodes, or its project's), or a
    whole project; and the occur_time window, if any."""

    session_id: int = 0
    project_id: int = 0
    window: TimeWindow | None = None


@dataclass(frozen=True)
class EpisodeScope:
    session_ids: list[int]
    allowed: frozenset[int]
    #: The request's window (None: any time).
    window: TimeWindow | None
    #: The oldest occur_time the project keeps (None: no retention).
    cutoff: float | None
    #: Both at once, as the paths push them down.
    searched: TimeWindow | None
    #: Words on more than half the scope's recent texts.
    common: frozenset[str]
    #: The keyword query (FTS5), None when no word is left to search.
    match: str | None

    def semantic_text(self, text: str) -> str:
        """The vector query: the text less the scope's common words (the
        vector path's own: a keyword search never builds it)."""
        return without(text, self.common)


class Episodes:
    async def open(self, engine: Engine[Any], call: Call) -> bool:
        request: EpisodeRequest = call.request
        window = v.time_window(request.window)
        at = time.time()

        def read(uow: UnitOfWork) -> tuple[list[int], float | None]:
            session_ids = episode_scope(uow, request.session_id, request.project_id)
            return session_ids, retention_cutoff(uow, request.session_id, request.project_id, at)

        session_ids, cutoff = await engine.db.read_in_transaction(read)
        if not session_ids:
            return False
        if cutoff is not None and window is not None and window.end is not None:
            if window.end <= cutoff:
                return False  # the whole window is past the project's retention
        common = await engine.vocabulary.common(
            tuple(sorted(session_ids)),
            lambda size: engine.db.read(lambda c: c.episodes.scope_sample(session_ids, size)),
        )
        call.scope = EpisodeScope(
            session_ids=session_ids,
            allowed=frozenset(session_ids),
            window=window,
            cutoff=cutoff,
            searched=_retained(window, cutoff),
            common=common,
            match=keyword_query.match_expression(call.text, drop=common),
        )
        return True

    def document(self, row: Episode) -> str:
        return row.text

    def hit(self, candidate: Candidate, call: Call) -> EpisodeHit:
        row: Episode = candidate.row
        return EpisodeHit(
            row,
            candidate.score,
            candidate.snippet or _snippet(row.user_message),
            candidate.sources,
            degraded_reason=call.degraded_reason,
            reranked=candidate.reranked,
        )


def retention_cutoff(uow: UnitOfWork, session_id: int, project_id: int, at: float) -> float | None:
    """The oldest occur_time the searched project keeps at ``at`` (the asking
    session's project, or ``project_id``); None: it keeps everything."""
    if session_id > 0:
        return uow.episodes.retention_cutoff(session_id, at)
    if project_id > 0:
        retention = uow.projects.retention_of(project_id)
        return None if retention is None else at - retention
    return None


def _retained(window: TimeWindow | None, cutoff: float | None) -> TimeWindow | None:
    """``window`` with its start moved up to ``cutoff``."""
    if cutoff is None:
        return window
    start = None if window is None else window.start
    end = None if window is None else window.end
    if start is None or start < cutoff:
        return TimeWindow(cutoff, end)
    return window


# Filters (filters.py): the last word on each row, before the page.


def in_scope(row: Episode, call: Call) -> bool:
    return row.session_id in call.scope.allowed


def in_window(row: Episode, call: Call) -> bool:
    window: TimeWindow | None = call.scope.window
    return window is None or window.holds(row.occur_at)


def retained(row: Episode, call: Call) -> bool:
    cutoff: float | None = call.scope.cutoff
    return cutoff is None or row.occur_at >= cutoff


def keyword_match(call: Call) -> str | None:
    return call.scope.match if call.scope is not None else None


def _snippet(text: str, width: int = SNIPPET_CHARS) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
