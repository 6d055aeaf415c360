"""Writes to an entity and the index job each one owes its vector, decided
here and queued in the write's own transaction.

An entity's vector is made from its name, aliases and notes, so a new entity,
a new alias, new notes, a merge's reinserted source and a delete each queue
``index:entities`` (a delete's, and a merged source's removal, while the row
is still there: the job takes the row's tenant). A new entity whose vector
its writer stores beside the row (``embedded``, domain/inline_vectors.py)
queues none. The store writes the rows and queues nothing.
"""

from __future__ import annotations

from typing import Any

from nexus_grpc.core import jobs
from nexus_grpc.core.graph import Entity, Graph
from nexus_grpc.core.repositories import UnitOfWork


def reindex(uow: UnitOfWork, entity_id: int) -> None:
    """The entity's ``index:entities`` job (a point written again, or removed)."""
    uow.jobs.enqueue(jobs.INDEX_ENTITY, [entity_id])


def insert(
    uow: UnitOfWork,
    graph: Graph,
    surface: str,
    etype: str,
    notes: str | None,
    *,
    embedded: bool = False,
    **columns: Any,
) -> int:
    """A new entity (``GraphRepository.insert_entity``), its embedding queued
    unless ``embedded``."""
    entity_id = uow.graph.insert_entity(graph, surface, etype, notes, **columns)
    if not embedded:
        reindex(uow, entity_id)
    return entity_id


def mention(uow: UnitOfWork, entity_id: int, notes: str | None, **kw: Any) -> None:
    """One more mention; new notes change its vector."""
    uow.graph.mention(entity_id, notes, **kw)
    if notes is not None:
        reindex(uow, entity_id)


def add_alias(uow: UnitOfWork, entity_id: int, surface: str, **kw: Any) -> bool:
    """A surface name of the entity; a new one changes its vector."""
    added = uow.graph.add_alias(entity_id, surface, **kw)
    if added:
        reindex(uow, entity_id)
    return added


def delete(uow: UnitOfWork, entity_id: int) -> int:
    """Delete the entity (``GraphRepository.delete_entity``), its point's job
    first (a missing entity fails the write, and the job with it)."""
    reindex(uow, entity_id)
    return uow.graph.delete_entity(entity_id)


def delete_merged(uow: UnitOfWork, source_id: int) -> None:
    """A merged source's row, what it held moved already; its point's job first."""
    reindex(uow, source_id)
    uow.graph.delete_entity_row(source_id)


def reinsert(uow: UnitOfWork, e: Entity) -> int:
    """A merged source back (undo), its embedding queued."""
    entity_id = uow.graph.reinsert_entity(e)
    reindex(uow, entity_id)
    return entity_id
