"""The ``retain:project`` worker: deletes a project's sessions, episodes and
summaries once they are past its retention.

Reads hide them from the moment they pass it (``store/sessions._retained``,
``episodes.retention_cutoff``, the search window, ``summaries._retained``);
this job makes them gone for good, with their index points (index jobs in the
same transaction), a deleted session's summaries and graph links (by cascade).
A summary (or overview) last written before the cutoff goes too: all it was
written from happened before then. A deleted session's TASK-tier USER
memories stay: they belong to their users, whom no one asked (the project's
own TASK memories go with the session, as DeleteSession takes them).
Setting a retention (a project created or updated with one, ``start``) or
moving a session into a project that has one (``session_moved``) makes the
sweep due at once, in the same transaction; each run
deletes up to ``CHUNK`` rows of each kind and schedules the next run: at
once when it stopped at the chunk, else when
the oldest remaining exchange passes the retention, and at most an hour away,
since an episode imported later with an old occur_time may pass it sooner.
A project whose retention was cleared (or that is gone) ends the chain.
"""

from __future__ import annotations

from nexus_grpc.core import jobs
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain import erasure as erasing

#: Rows of each kind deleted per run (per transaction).
CHUNK = 500
#: The longest a sweep waits before looking again.
RECHECK_SECONDS = 3600.0


def start(uow: UnitOfWork, project_id: int, at: float) -> None:
    """The project's sweep due at ``at`` (now): it schedules itself from there on."""
    uow.jobs.schedule(jobs.RETAIN_PROJECT, project_id, at)


def session_moved(uow: UnitOfWork, project_id: int, at: float) -> None:
    """A session just moved into ``project_id``: reads hide what the project's
    retention has passed at once, and the sweep (scheduled up to an hour ahead
    when the project had nothing to sweep) now looks at what came in."""
    if project_id and uow.projects.retention_of(project_id) is not None:
        start(uow, project_id, at)


def sweep(uow: UnitOfWork, project_id: int, at: float) -> None:
    """One run of ``project_id``'s sweep at ``at``, and the next one scheduled."""
    retention = uow.projects.retention_of(project_id)
    if retention is None:
        return
    cutoff = at - retention
    episodes = uow.episodes.past_retention(project_id, cutoff, CHUNK)
    # As a deleted episode goes (domain/erasure.py), but for its summaries:
    # those go by this sweep's own rule below.
    erasing.forget_episodes(uow, episodes, summaries=False)
    sessions = uow.sessions.past_retention(project_id, cutoff, CHUNK)
    for session_id in sessions:
        left = uow.erasures.episodes_in_sessions([session_id], erasing.NO_LIMIT)
        erasing.forget_episodes(uow, left, whole_sessions=True, summaries=False)
        # No user asked for this delete: their TASK-tier memories stay (as
        # SESSION-tier ones do), for them to read and delete; the project's go.
        erasing.remove_session(uow, session_id, user_task_memories=False)
    summaries = uow.summaries.past_retention(project_id, cutoff, CHUNK)
    erasing.remove_summaries(uow, summaries)
    if episodes or sessions or summaries:
        erasing.scrub_soon(uow, erasing.SCRUB_DELAY)
    if CHUNK in (len(episodes), len(sessions), len(summaries)):
        uow.jobs.schedule(jobs.RETAIN_PROJECT, project_id, at, keep_sooner=True)
        return
    oldest = uow.episodes.oldest_in_project(project_id)
    upcoming = at + RECHECK_SECONDS if oldest is None else oldest + retention
    next_run = min(upcoming, at + RECHECK_SECONDS)
    uow.jobs.schedule(jobs.RETAIN_PROJECT, project_id, next_run, keep_sooner=True)
