"""ExportProject's own rules (domain/export.py), decided on the fakes of
tests/fakes.py: what a caller may export (its tenant's projects, the USER
memories of the users its key acts for), and what an export leaves out
(a memory already expired, an episode past the project's retention, and
every reference to it).

What a client sees of them (the stream over the wire, the keys' tenants and
users, the commands' files) is tests/e2e/service/test_export_project.py's.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from nexus_grpc.core.graph import Relationship
from nexus_grpc.core.models import Episode, MemoryKind
from nexus_grpc.core.records import Memory
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.export import ExportItem, ProjectExport
from nexus_grpc.domain.graph import Graph
from nexus_grpc.domain.memories import Memories
from nexus_grpc.errors import InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.callers import acting_as

DAY = 86_400.0


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def db(uow: FakeUnitOfWork) -> FakeDatabase:
    return FakeDatabase(uow)


async def export(db: FakeDatabase, project_id: int) -> list[ExportItem]:
    return [item async for item in ProjectExport(db).records(project_id)]


def of(items: list[ExportItem], kind: type) -> list:
    return [x for x in items if isinstance(x, kind)]


async def memory(db: FakeDatabase, project_id: int, title: str, user_id: str = "") -> Memory:
    # Memory writes read neither the embedder nor the index.
    memories = Memories(db, JobSignals(), None, None)  # type: ignore[arg-type]
    kind = MemoryKind.USER if user_id else MemoryKind.PROJECT
    values = {"kind": int(kind), "user_id": user_id, "project_id": project_id}
    return await memories.create({**values, "title": title, "content": "c"})


async def test_a_memory_already_expired_is_not_exported(uow, db):
    project = uow.projects.insert({"name": "p"})
    kept = await memory(db, project.id, "kept")
    gone = await memory(db, project.id, "gone")
    # Expired a moment ago; its removal job has not run yet.
    uow.memories.rows[gone.id] = replace(uow.memories.rows[gone.id], expire_at=time.time() - 1)
    assert [m.id for m in of(await export(db, project.id), Memory)] == [kept.id]


async def test_user_memories_go_only_to_a_key_that_acts_for_their_user(uow, db):
    project = uow.projects.insert({"name": "p"})
    for user in ("alice", "bob"):
        await memory(db, project.id, user, user_id=user)
    await memory(db, project.id, "shared")

    async def exported_for(users: frozenset[str] | None) -> list[str]:
        with acting_as("default", users):
            return [m.title for m in of(await export(db, project.id), Memory)]

    assert await exported_for(frozenset({"alice"})) == ["alice", "shared"]
    assert await exported_for(None) == ["alice", "bob", "shared"]


async def test_a_project_the_caller_may_not_see_is_not_found_before_anything_is_sent(uow, db):
    project = uow.projects.insert({"name": "p"}, "acme")
    with acting_as("globex"):
        stream = ProjectExport(db).records(project.id)
        with pytest.raises(NotFound):
            await anext(stream)
    with pytest.raises(InvalidArgument, match="project_id"):
        await anext(ProjectExport(db).records(0))
    # Its own tenant's key sees it.
    with acting_as("acme"):
        assert (await export(db, project.id))[0] == uow.projects.rows[project.id]


async def test_an_episode_past_retention_is_left_out_and_so_are_references_to_it(uow, db):
    now = time.time()
    conversations = Conversations(db, JobSignals())
    project = await conversations.create_project({"name": "p", "retention": 30 * DAY})
    session = (await conversations.create_session("", "s", project.id, {})).id
    old, new = [
        (await conversations.create_episode(session, text, "", {}, "", occur_at=at)).id
        for text, at in (("old", now - 60 * DAY), ("new", now - DAY))
    ]
    graph = Graph(db, JobSignals(), None, None, None)  # type: ignore[arg-type]
    a = await graph.upsert_entity("Ada", "person", "", 0.0, project.id)
    b = await graph.upsert_entity("Postgres", "technology", "", 0.0, project.id)
    fact = await graph.upsert_relationship(a.id, b.id, "maintains", "")
    uow.graph.relationships[fact.id] = replace(
        uow.graph.relationships[fact.id], asserted_by=old, ended_by=new
    )
    items = await export(db, project.id)
    assert [e.id for e in of(items, Episode)] == [new]
    [relationship] = of(items, Relationship)
    assert (relationship.asserted_by, relationship.ended_by) == (None, new)
