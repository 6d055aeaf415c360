"""Merging entities into one, and undoing a merge.

A merge folds sources into a target in one transaction: their aliases, their
episode links and the evidence of every fact they took part in move to the
target; the facts are derived again from that evidence (domain/facts.py), so
relationships re-point by themselves, duplicates combine with their mentions
summed, and one that would join the target to itself is dropped. The sources
go; the merge is recorded with what each source was and exactly what moved
from it, which is what undoing needs: put the sources back under their own
ids, move those aliases, links and evidence back, and derive the facts again.

A merge can be undone while no later merge depends on it, that is, while no
later merge (not undone) took its target in, as target or source: undoing it
then would move things out from under that later merge.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.graph import MERGE_MANUAL, EntityMerge, MergedSource
from nexus_grpc.core.models import Page
from nexus_grpc.core.names import compatible_types
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import entity_writes, facts, paging
from nexus_grpc.domain import validation as v
from nexus_grpc.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceInfo,
)

MAX_SOURCES = 100
MAX_REASON_CHARS = 1000


def merge_into(
    uow: UnitOfWork,
    target_id: int,
    source_ids: Sequence[int],
    *,
    method: str,
    reason: str = "",
    request_id: str | None = None,
    principal: str = "",
) -> EntityMerge:
    """Fold ``source_ids`` into ``target_id`` (both checked by the caller:
    one graph, compatible types) and record it."""
    target = uow.graph.get_entity(target_id)
    sources: list[MergedSource] = []
    for source_id in source_ids:
        source = uow.graph.get_entity(source_id)
        norms = uow.graph.move_aliases(source_id, target_id)
        moved, shared = uow.graph.move_episode_links(source_id, target_id)
        ev_from, ev_to = uow.graph.move_evidence(source_id, target_id)
        uow.graph.add_mentions(target_id, source.mention_count, source.notes)
        entity_writes.delete_merged(uow, source_id)
        sources.append(
            MergedSource(
                entity=source,
                alias_names=tuple(norms),
                episode_ids=tuple(moved),
                shared_episode_ids=tuple(shared),
                evidence_from=tuple(ev_from),
                evidence_to=tuple(ev_to),
            )
        )
    uow.graph.rebuild_tokens(target_id)
    uow.graph.refresh_display_name(target_id)
    uow.jobs.enqueue(jobs.INDEX_ENTITY, [target_id])
    graph = (target.project_id, target.session_id)
    facts.rederive(uow, uow.graph.groups_of([target_id]), facts.single_valued(uow, graph))
    record = EntityMerge(
        id=0,
        project_id=target.project_id,
        session_id=target.session_id,
        tenant=target.tenant,
        target_id=target_id,
        source_ids=tuple(source_ids),
        method=method,
        reason=reason,
        created_at=time.time(),
        request_id=request_id,
        principal=principal,
        target_notes=target.notes,
        sources=tuple(sources),
    )
    return replace(record, id=uow.graph.insert_merge(record))


def undo_merge(uow: UnitOfWork, merge: EntityMerge) -> EntityMerge:
    if merge.undone_at is not None:
        raise FailedPrecondition(f"merge {merge.id} was already undone")
    involved = {merge.target_id}
    blocking = [
        later.id
        for later in uow.graph.merges_after(merge)
        if involved & {later.target_id, *later.source_ids}
    ]
    if blocking:
        shown = ", ".join(str(i) for i in blocking[:10])
        raise FailedPrecondition(
            f"merge {merge.id} cannot be undone while later merge(s) {shown} of its target"
            f" entity {merge.target_id} stand: undo those first"
        )
    if uow.graph.entity_graph(merge.target_id) is None:
        raise FailedPrecondition(
            f"merge {merge.id} cannot be undone: its target entity {merge.target_id} was deleted"
        )
    target = merge.target_id
    # The target's facts as they stand merged: a fact that came only from a
    # source's evidence has none left on the target once it goes back, and
    # must be derived again (to nothing), not left standing.
    merged_groups = uow.graph.groups_of([target])
    restored: list[int] = []
    for source in reversed(merge.sources):
        e = source.entity
        entity_id = entity_writes.reinsert(uow, e)
        restored.append(entity_id)
        uow.graph.return_aliases(target, entity_id, source.alias_names)
        uow.graph.return_episode_links(
            target, entity_id, source.episode_ids, source.shared_episode_ids
        )
        uow.graph.return_evidence(entity_id, source.evidence_from, source.evidence_to)
        uow.graph.add_mentions(target, -e.mention_count)
        uow.graph.rebuild_tokens(entity_id)
    uow.graph.set_notes(target, merge.target_notes)
    uow.graph.rebuild_tokens(target)
    uow.graph.refresh_display_name(target)
    for entity_id in restored:
        uow.graph.restore_name_key(entity_id)
    uow.jobs.enqueue(jobs.INDEX_ENTITY, [target])
    facts.rederive(
        uow,
        merged_groups | uow.graph.groups_of([target, *restored]),
        facts.single_valued(uow, (merge.project_id, merge.session_id)),
    )
    uow.graph.mark_undone(merge.id)
    return uow.graph.get_merge(merge.id)


class Merges:
    """MergeEntities, UndoMerge and ListMerges."""

    def __init__(self, db: Database, signals: JobSignals) -> None:
        self.db = db
        self.signals = signals

    async def merge(
        self,
        target_id: int,
        source_ids: Sequence[int],
        request_id: str = "",
        reason: str = "",
        *,
        principal: str = "",
    ) -> EntityMerge:
        v.positive_id("target_id", target_id)
        if not source_ids:
            raise InvalidArgument(
                "source_ids must name at least one entity to merge", field="source_ids"
            )
        if len(source_ids) > MAX_SOURCES:
            raise InvalidArgument(
                f"source_ids has {len(source_ids)} ids; at most {MAX_SOURCES} per merge",
                field="source_ids",
            )
        for i in source_ids:
            v.positive_id("source_ids", i)
        sources = list(dict.fromkeys(source_ids))
        if target_id in sources:
            raise InvalidArgument(f"source_ids includes the target {target_id}", field="source_ids")
        v.identifier("request_id", request_id)
        v.text("reason", reason, limit=MAX_REASON_CHARS)
        tenant = tenancy.visible()

        def write(uow: UnitOfWork) -> EntityMerge:
            target = uow.graph.get_entity(target_id, tenant)
            if request_id:
                # A retried merge answers with the merge it made (its sources
                # are gone by now, so checking them again would refuse it).
                done = uow.graph.merge_by_request(target.tenant, request_id)
                if done is not None:
                    if (done.target_id, done.source_ids) != (target_id, tuple(sources)):
                        raise AlreadyExists(
                            f"request_id {v.quoted(request_id)} was already used for merge"
                            f" {done.id}, of other entities"
                        )
                    return done
            found = uow.graph.get_entities(sources, tenant)
            missing = [i for i in sources if i not in found]
            if missing:
                raise NotFound(
                    f"source_ids: no entity {', '.join(map(str, missing[:10]))}",
                    resource_type="entity",
                    resource_name=missing[0],
                    details=[ResourceInfo("entity", str(i)) for i in missing[1:10]],
                )
            graph = (target.project_id, target.session_id)
            for source in found.values():
                if (source.project_id, source.session_id) != graph:
                    raise InvalidArgument(
                        f"entity {source.id} is in another graph than target {target_id}:"
                        " only entities of one graph merge",
                        field="source_ids",
                    )
                if source.type not in compatible_types(target.type):
                    raise InvalidArgument(
                        f"entity {source.id} is a {source.type} and target {target_id} a"
                        f" {target.type}: entities of those types never merge",
                        field="source_ids",
                    )
            return merge_into(
                uow,
                target_id,
                sources,
                method=MERGE_MANUAL,
                reason=reason.strip(),
                request_id=request_id or None,
                principal=principal,
            )

        merge = await self.db.write(write)
        self.signals.wake(jobs.INDEX_ENTITY)
        return merge

    async def undo(self, merge_id: int) -> EntityMerge:
        v.positive_id("merge_id", merge_id)
        tenant = tenancy.visible()
        merge = await self.db.write(lambda c: undo_merge(c, c.graph.get_merge(merge_id, tenant)))
        self.signals.wake(jobs.INDEX_ENTITY)
        return merge

    async def list(
        self, project_id: int, session_id: int, entity_id: int, page_size: int, page_token: str
    ) -> Page[EntityMerge]:
        for field, value in (
            ("project_id", project_id),
            ("session_id", session_id),
            ("entity_id", entity_id),
        ):
            v.positive_id(field, value, required=False)
        if sum(1 for x in (project_id, session_id, entity_id) if x) != 1:
            raise InvalidArgument(
                "give exactly one of project_id, session_id (a session outside any project)"
                " or entity_id",
                fields=("project_id", "session_id", "entity_id"),
            )
        size = paging.page_size(page_size)
        after = paging.decode_token(page_token)
        tenant = tenancy.visible()
        graph = (project_id, 0) if project_id else (0, session_id) if session_id else None
        rows = await self.db.read(
            lambda c: c.graph.list_merges(graph, entity_id, after, size + 1, tenant)
        )
        return paging.page(rows, size)
