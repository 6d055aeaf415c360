"""What follows a new episode: a rule of the service, decided here and written
by the store in the episode's own transaction (so a stored episode always has
its work queued, and nothing is queued for one that was not stored).

- Its embedding (``index:episodes``), unless its vector was stored beside it
  (``embedded``, domain/inline_vectors.py).
- Its extraction (``extract:episode``), unless it was restored with the
  entities and relationships extraction made of it (``extracted``): a second
  extraction would count every mention twice.
- Its memory formation, marked due where it applies (domain/formation.py):
  the project forms memories, and the session names its user or the project
  forms PROJECT memories too. Whether its writer could act for that user is
  checked when formation runs, where the rule is enforced.
- A session summary, once the session has grown enough since its last one
  (``summary_due``): at least ``SUMMARY_MIN_NEW_EPISODES`` new episodes and,
  in all, more than ``SUMMARY_MIN_CHARS`` characters (about 200 tokens).
  A restore's sessions get the summary a live session would have queued by
  now, once their summaries are restored too (domain/restore.py).

Each job is queued at the caller's priority: an import's (BULK) behind live
traffic's (LIVE).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nexus_grpc.core import jobs
from nexus_grpc.core.models import Episode, JobState
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain import formation

#: A session's first summary waits for this many characters of conversation
#: (about 200 tokens)...
SUMMARY_MIN_CHARS = 800
#: ...and every summary for this many episodes since the last one.
SUMMARY_MIN_NEW_EPISODES = 5


def queue_followups(
    uow: UnitOfWork,
    episodes: Sequence[Episode],
    priority: int,
    *,
    embedded: bool = False,
    extracted: bool = False,
) -> list[Episode]:
    """Queue what follows ``episodes``, just stored in ``uow``'s transaction;
    returns them as they now stand (their formation marked due)."""
    if not episodes:
        return []
    ids = [e.id for e in episodes]
    if not embedded:
        uow.jobs.enqueue(jobs.INDEX_EPISODE, ids, priority=priority)
    if extracted:
        return list(episodes)
    sessions = {e.session_id for e in episodes}
    forming = {s for s in sessions if formation.due(uow, uow.sessions.get(s))}
    uow.episodes.set_memory_pending([e.id for e in episodes if e.session_id in forming])
    uow.jobs.enqueue(jobs.EXTRACT_EPISODE, ids, priority=priority)
    queue_summaries(uow, sorted(sessions), priority)
    return [
        replace(e, memory_state=JobState.PENDING) if e.session_id in forming else e
        for e in episodes
    ]


def queue_summaries(uow: UnitOfWork, session_ids: Sequence[int], priority: int) -> None:
    """A summary job for each of these sessions whose summary is due."""
    due = [s for s in session_ids if summary_due(uow, s)]
    uow.jobs.enqueue(jobs.SUMMARIZE_SESSION, due, priority=priority)


def summary_due(uow: UnitOfWork, session_id: int) -> bool:
    """Whether the session now needs a summary: none is queued yet, enough
    episodes came since the last one, and the conversation is long enough."""
    progress = uow.episodes.summary_progress(
        session_id, SUMMARY_MIN_NEW_EPISODES, SUMMARY_MIN_CHARS
    )
    return (
        not progress.queued
        and progress.new_episodes >= SUMMARY_MIN_NEW_EPISODES
        and progress.chars > SUMMARY_MIN_CHARS
    )
