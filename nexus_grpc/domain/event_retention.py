"""Extraction events are kept for --extraction-event-retention-days, as a
deleted memory's history is: long enough for a watcher that was away to
resume from its cursor and hear what it missed, not for ever (an event
names the entities and the memories its episode formed). The
``purge:extraction_events`` job removes the older ones a chunk a run and
schedules its next run: at once while it finds a full chunk, else in an hour.
The server schedules it at start."""

from __future__ import annotations

from nexus_grpc.core import jobs
from nexus_grpc.core.repositories import UnitOfWork

#: Events removed per run (per transaction).
CHUNK = 1000
#: How long the purge waits when it found nothing more to remove.
RECHECK_SECONDS = 3600.0


def purge(uow: UnitOfWork, at: float, retention: float) -> None:
    removed = uow.events.delete_before(at - retention, CHUNK)
    next_run = at if removed >= CHUNK else at + RECHECK_SECONDS
    uow.jobs.schedule(jobs.PURGE_EVENTS, 0, next_run, keep_sooner=True)


def start(uow: UnitOfWork, at: float) -> None:
    """The purge's first run, unless one is queued already."""
    uow.jobs.schedule(jobs.PURGE_EVENTS, 0, at, keep_sooner=True)
