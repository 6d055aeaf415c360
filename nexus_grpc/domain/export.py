"""ExportProject: everything a project holds, in an order that can be imported.

Records come out in the order an importer needs them: the project, its
sessions, their episodes, its memories (each followed by its history), the
entities and relationships of its graph, then the graph's history (entity
aliases, entity-episode links, relationship evidence, merges), and its
summaries (which name episodes and sessions). A reference to an episode the
export leaves out (past the project's retention) is cleared. Each kind is
read in pages in its own short read, so a large project never holds one read
transaction (and the WAL) open for the whole stream; the export is therefore
not one snapshot.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from nexus_grpc.core import tenancy
from nexus_grpc.core.graph import (
    Entity,
    EntityAlias,
    EntityEpisode,
    EntityMerge,
    Evidence,
    Relationship,
)
from nexus_grpc.core.models import Episode, MemoryKind, Project, Session
from nexus_grpc.core.records import Memory, Revision, Summary
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import validation as v

#: Rows per read.
PAGE = 500

ExportItem = (
    Project
    | Session
    | Episode
    | Memory
    | Revision
    | Entity
    | Relationship
    | EntityAlias
    | EntityEpisode
    | Evidence
    | EntityMerge
    | Summary
)
R = TypeVar("R")


class ProjectExport:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def records(self, project_id: int) -> AsyncIterator[ExportItem]:
        v.positive_id("project_id", project_id)
        tenant = tenancy.visible()
        # NOT_FOUND for a project this caller may not see, before anything is sent.
        yield await self.db.read(lambda c: c.projects.get(project_id, tenant))

        # What is past the project's retention is gone for every read.
        at = time.time()
        retention = await self.db.read(lambda c: c.projects.retention_of(project_id))
        cutoff = None if retention is None else at - retention
        sessions: list[Session] = []
        async for session in self._pages(
            lambda c, after: c.sessions.list_page(after, PAGE, project_id, tenant, retained_at=at)
        ):
            sessions.append(session)
            yield session
        exported: set[int] = set()
        for session in sessions:
            async for episode in self._pages(_episodes_of(session.id)):
                if cutoff is None or episode.occur_at >= cutoff:
                    exported.add(episode.id)
                    yield episode

        def kept(episode_id: int | None) -> int | None:
            return episode_id if episode_id in exported else None

        async for memory in self._pages(
            lambda c, after: c.memories.list_in_project(project_id, tenant, after, PAGE, at)
        ):
            # USER memories belong to their user: only a key that may act for
            # that user exports them, as only it may read them.
            if memory.kind == MemoryKind.USER and not tenancy.may_act_for(memory.user_id):
                continue
            yield memory
            async for revision in self._pages(_history_of(memory.id)):
                yield revision

        async for entity in self._pages(
            lambda c, after: c.graph.list_entities("", project_id, after, PAGE)
        ):
            yield entity
        entities: set[int] = set()
        async for relationship in self._pages(
            lambda c, after: c.graph.relationships_in_project(project_id, after, PAGE)
        ):
            yield replace(
                relationship,
                asserted_by=kept(relationship.asserted_by),
                ended_by=kept(relationship.ended_by),
            )
        async for alias in self._pages(
            lambda c, after: c.graph.aliases_in_project(project_id, after, PAGE)
        ):
            entities.add(alias.entity_id)
            yield replace(alias, episode_id=kept(alias.episode_id))
        async for link in self._links(project_id):
            if link.episode_id in exported:
                yield link
        async for evidence in self._pages(
            lambda c, after: c.graph.evidence_in_project(project_id, after, PAGE)
        ):
            yield replace(evidence, episode_id=kept(evidence.episode_id))
        async for merge in self._pages(
            lambda c, after: c.graph.list_merges((project_id, 0), 0, after, PAGE, None)
        ):
            # A merge whose target was deleted since cannot be undone anywhere.
            if merge.target_id in entities:
                yield _without_episodes(merge, exported)
        async for summary in self._pages(
            lambda c, after: c.summaries.list_for_project(project_id, after, PAGE, retained_at=at)
        ):
            yield summary

    async def _links(self, project_id: int) -> AsyncIterator[EntityEpisode]:
        after: tuple[int, int] | None = None
        while True:

            def fetch(
                uow: UnitOfWork, start: tuple[int, int] | None = after
            ) -> list[tuple[int, int]]:
                return uow.graph.episode_links_in_project(project_id, start, PAGE)

            rows = await self.db.read(fetch)
            for entity_id, episode_id in rows:
                yield EntityEpisode(entity_id, episode_id)
            if len(rows) < PAGE:
                return
            after = rows[-1]

    async def _pages(self, read: Callable[[UnitOfWork, Any], Sequence[R]]) -> AsyncIterator[R]:
        """Every row ``read`` returns, page after page, oldest first (keyset:
        ``read`` takes the last id already returned)."""
        after: int | None = None
        while True:

            def fetch(uow: UnitOfWork, start: int | None = after) -> Sequence[R]:
                return read(uow, start)

            rows = await self.db.read(fetch)
            for row in rows:
                yield row
            if len(rows) < PAGE:
                return
            after = rows[-1].id  # type: ignore[attr-defined]


def _episodes_of(session_id: int) -> Callable[[UnitOfWork, Any], list[Episode]]:
    return lambda c, after: c.episodes.list_for_session(session_id, after or 0, PAGE)


def _history_of(memory_id: int) -> Callable[[UnitOfWork, Any], list[Revision]]:
    return lambda c, after: c.memories.page(memory_id, after, PAGE)


def _without_episodes(merge: EntityMerge, exported: set[int]) -> EntityMerge:
    """The merge with only the episode links its export holds."""
    return replace(
        merge,
        sources=tuple(
            replace(
                s,
                episode_ids=tuple(e for e in s.episode_ids if e in exported),
                shared_episode_ids=tuple(e for e in s.shared_episode_ids if e in exported),
            )
            for s in merge.sources
        ),
    )
