"""What happens to a memory after the call that changed it: its index job,
its expiry, and the purge of a deleted memory's history.

Index: a memory's vector is made from its words and its payload from its
columns, so an insert, an update that changes anything and a delete each
queue ``index:memories`` in the write's own transaction (a delete's while the
row is still there: the job takes the row's tenant). A new memory whose
vector its writer stores beside the row (``embedded``,
domain/inline_vectors.py) queues none. The store writes the rows and queues
nothing.

Expiry: reads hide an expired memory from the moment it expires
(``memory_scope``); the ``expire:memory`` job makes it gone for good.
Creating or updating a memory with an expire_time schedules the job for that
time in the same transaction, so a crash never leaves an expiry
unscheduled. ``expire`` re-reads the row: a memory whose expiry moved later
is rescheduled, one that no longer expires (or is already gone) is left
alone. The removal keeps its last version in the memory's history
(MEMORY_CHANGE_EXPIRE) and deletes its point via the outbox.

History purge: a deleted memory's history is kept for the history
retention; the ``purge:memory_history`` job scheduled with the delete
removes it then.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from nexus_grpc.core import jobs
from nexus_grpc.core.records import DELETE, EXPIRE, ChangedBy, Memory
from nexus_grpc.core.repositories import UnitOfWork

EXPIRED_BY = ChangedBy(request_id="", principal="")


def insert(
    uow: UnitOfWork,
    values: Mapping[str, Any],
    request_id: str | None,
    tenant: str,
    *,
    embedded: bool = False,
) -> Memory:
    """A new memory (``MemoryRepository.insert``), its embedding queued
    unless ``embedded``."""
    memory = uow.memories.insert(values, request_id, tenant)
    if not embedded:
        uow.jobs.enqueue(jobs.INDEX_MEMORY, [memory.id])
    return memory


def update(uow: UnitOfWork, memory_id: int, changes: Mapping[str, Any]) -> Memory:
    """``changes`` written to a memory, its point written again if any were given."""
    updated = uow.memories.update(memory_id, changes)
    if changes:
        uow.jobs.enqueue(jobs.INDEX_MEMORY, [memory_id])
    return updated


def delete(uow: UnitOfWork, memory_id: int) -> None:
    """A memory's row removed, and its point with it (the job queued first)."""
    uow.jobs.enqueue(jobs.INDEX_MEMORY, [memory_id])
    uow.memories.delete(memory_id)


def schedule_expiry(uow: UnitOfWork, memory_id: int, expire_at: float | None) -> None:
    """The ``expire:memory`` job for a memory just written with ``expire_at``
    (none when it does not expire), in the write's own transaction."""
    if expire_at is not None:
        uow.jobs.schedule(jobs.EXPIRE_MEMORY, memory_id, expire_at)


def record_deletion(
    uow: UnitOfWork, memory: Memory, by: ChangedBy, retention: float, action: int = DELETE
) -> None:
    """The delete's (or expiry's) revision, and the job that purges the
    memory's history once ``retention`` seconds have passed."""
    purge_after = time.time() + retention
    uow.memories.record_deletion(memory, by, purge_after, action)
    uow.jobs.enqueue(jobs.PURGE_MEMORY_HISTORY, [memory.id], run_after=purge_after)


def expire(uow: UnitOfWork, memory_id: int, at: float, history_retention: float) -> None:
    """Remove ``memory_id`` if its expire_time passed by ``at``."""
    memory = uow.memories.find(memory_id)
    if memory is None or memory.expire_at is None:
        return
    if memory.expire_at > at:
        uow.jobs.schedule(jobs.EXPIRE_MEMORY, memory_id, memory.expire_at, keep_sooner=True)
        return
    record_deletion(uow, memory, EXPIRED_BY, history_retention, EXPIRE)
    delete(uow, memory_id)


def purge_history(uow: UnitOfWork, memory_id: int, at: float) -> None:
    """Drop the history of deleted ``memory_id`` whose retention ended by ``at``."""
    uow.memories.purge([memory_id], at)
