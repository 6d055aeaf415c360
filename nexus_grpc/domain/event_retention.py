"""Extraction events are kept for --extraction-event-retention-days, as a
deleted memory's history is: long enough for a watcher that was away to
resume from its cursor and hear what it missed, not for ever (an event names
the entities and the memories its episode formed). A replay never returns an
older event (``oldest_kept``, read with every page), and the storage upkeep
(workers/storage_upkeep.py) deletes them, a chunk a transaction, at start and
every hour."""

from __future__ import annotations

from nexus_grpc.core.repositories import UnitOfWork

#: Events removed per transaction.
CHUNK = 1000


def oldest_kept(at: float, retention: float) -> float:
    """The creation time before which an event is gone at ``at``."""
    return at - retention


def purge(uow: UnitOfWork, at: float, retention: float) -> int:
    """Remove up to CHUNK events past the retention; how many went."""
    return uow.events.delete_before(oldest_kept(at, retention), CHUNK)
