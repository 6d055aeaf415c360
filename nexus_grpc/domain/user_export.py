"""ExportUser: everything held about one user, for a data-access request
(docs/privacy.md), in the export format.

In order: their sessions; their episodes (every episode of their sessions,
then those written acting for them in other sessions); their USER memories,
each followed by its history; what the graph holds from their episodes (the
entities they mention, the relationships they asserted or ended, and the
evidence they gave); and the uses SelectMemories recorded for them. Other
users' words are not in it: a session of theirs is theirs whole, an episode
elsewhere is one written acting for them, and a shared entity comes as it
stands with only their evidence.

Who may: as ForgetUser (domain/erasures.py); any other request is NOT_FOUND,
as for a user who holds nothing.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import Episode, Session
from nexus_grpc.core.records import Memory, MemoryUsage, Revision
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.erasures import _nothing_held
from nexus_grpc.domain.export import ExportItem
from nexus_grpc.errors import InvalidArgument, NotFound

#: Rows per read.
PAGE = 500
UserExportItem = ExportItem | MemoryUsage


class UserExport:
    def __init__(self, db: Database, default_tenant: str) -> None:
        self.db = db
        self.default_tenant = default_tenant

    async def records(self, user_id: str, project_id: int) -> AsyncIterator[UserExportItem]:
        v.identifier("user_id", user_id)
        if not user_id:
            raise InvalidArgument("user_id is required", field="user_id")
        v.positive_id("project_id", project_id, required=False)
        tenant = tenancy.own(self.default_tenant)

        def check(uow: UnitOfWork) -> None:
            if not tenancy.may_act_for(user_id):
                raise _nothing_held(user_id)
            if project_id and not uow.projects.exists(project_id, tenant):
                raise NotFound(
                    f"project {project_id} does not exist",
                    resource_type="project",
                    resource_name=project_id,
                )
            held = uow.erasures.user_holds(tenant, user_id, project_id)
            if not (held.sessions or held.episodes or held.memories or held.memory_usage):
                raise _nothing_held(user_id)

        # NOT_FOUND before anything is sent.
        await self.db.read(check)

        store = _Reads(tenant, user_id, project_id)
        session_ids: list[int] = []
        async for ids in self._id_pages(store.sessions):
            session_ids += ids
            for session in await self.db.read(functools.partial(_sessions, ids=ids)):
                yield session
        episode_ids: list[int] = []
        in_sessions = functools.partial(_episodes_in, session_ids=session_ids)
        for pages in (self._id_pages(in_sessions), self._id_pages(store.episodes_elsewhere)):
            async for ids in pages:
                episode_ids += ids
                for episode in await self.db.read(functools.partial(_episodes, ids=ids)):
                    yield episode
        async for ids in self._id_pages(store.memories):
            memories = await self.db.read(functools.partial(_memories, ids=ids))
            for memory in memories:
                yield memory
                async for revision in self._history(memory.id):
                    yield revision
        for start in range(0, len(episode_ids), PAGE):
            chunk = episode_ids[start : start + PAGE]
            for item in await self.db.read(functools.partial(_graph, ids=chunk)):
                yield item
        async for usage in self._usage(store):
            yield usage

    async def _id_pages(
        self, read: Callable[[UnitOfWork, int], list[int]]
    ) -> AsyncIterator[list[int]]:
        after = 0
        while True:
            ids = await self.db.read(functools.partial(_call, read, after))
            if ids:
                yield ids
            if len(ids) < PAGE:
                return
            after = ids[-1]

    async def _history(self, memory_id: int) -> AsyncIterator[Revision]:
        after: int | None = None
        while True:
            page = await self.db.read(
                functools.partial(_revisions, memory_id=memory_id, after=after)
            )
            for revision in page:
                yield revision
            if len(page) < PAGE:
                return
            after = page[-1].id

    async def _usage(self, store: _Reads) -> AsyncIterator[MemoryUsage]:
        after = 0
        while True:
            page = await self.db.read(functools.partial(store.usage, after=after))
            for usage in page:
                yield usage
            if len(page) < PAGE:
                return
            after = page[-1].id


@dataclass(frozen=True)
class _Reads:
    """The user's rows, a page after ``after`` at a time."""

    tenant: str
    user_id: str
    project_id: int

    def sessions(self, uow: UnitOfWork, after: int) -> list[int]:
        return uow.erasures.user_sessions(self.tenant, self.user_id, self.project_id, PAGE, after)

    def episodes_elsewhere(self, uow: UnitOfWork, after: int) -> list[int]:
        return uow.erasures.user_episodes_elsewhere(
            self.tenant, self.user_id, self.project_id, PAGE, after
        )

    def memories(self, uow: UnitOfWork, after: int) -> list[int]:
        return uow.erasures.user_memories(self.tenant, self.user_id, self.project_id, PAGE, after)

    def usage(self, uow: UnitOfWork, after: int) -> list[MemoryUsage]:
        return uow.erasures.user_usage(self.tenant, self.user_id, self.project_id, PAGE, after)


def _call(read: Callable[[UnitOfWork, int], list[int]], after: int, uow: UnitOfWork) -> list[int]:
    return read(uow, after)


def _episodes_in(uow: UnitOfWork, after: int, session_ids: Sequence[int]) -> list[int]:
    return uow.erasures.episodes_in_sessions(session_ids, PAGE, after)


def _memories(uow: UnitOfWork, ids: Sequence[int]) -> list[Memory]:
    found = uow.memories.get_many(ids)
    return [found[i] for i in ids if i in found]


def _revisions(uow: UnitOfWork, memory_id: int, after: int | None) -> list[Revision]:
    return uow.memories.page(memory_id, after, PAGE)


def _graph(uow: UnitOfWork, ids: Sequence[int]) -> list[UserExportItem]:
    """The entities these episodes mention, with each mention and the aliases
    they gave; the relationships they asserted or ended, and the evidence
    they gave."""
    mentions, aliases, evidence, relationship_ids = uow.erasures.graph_of_episodes(ids)
    entity_ids = sorted({m.entity_id for m in mentions})
    entities = uow.graph.get_entities(entity_ids)
    items: list[UserExportItem] = [entities[i] for i in entity_ids if i in entities]
    items += mentions
    items += aliases
    items += uow.graph.get_relationships(relationship_ids)
    items += evidence
    return items


def _sessions(uow: UnitOfWork, ids: Sequence[int]) -> list[Session]:
    return [uow.sessions.get(i) for i in ids]


def _episodes(uow: UnitOfWork, ids: Sequence[int]) -> list[Episode]:
    found = uow.episodes.get_many(ids)
    return [found[i] for i in ids if i in found]
