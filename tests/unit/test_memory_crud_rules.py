"""What CreateMemory, ListMemories, UpdateMemory and DeleteMemory decide
(domain/memories.py, domain/memory_upkeep.py), on the fakes of
tests/fakes.py: a memory refused by name with nothing written, what an
update may change, listing a page at a time, and the index job each write
queues.

What a client sees of them over gRPC (the status codes, the output-only
fields, the trailer of the same words) is tests/e2e/service/test_memories.py's;
a vector written beside the row (pgvector) queuing no job is
tests/e2e/service/test_inline_vectors.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.models import MemoryKind, MemoryScope, Tier
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import memory_upkeep
from nexus_grpc.domain.memories import Memories
from nexus_grpc.errors import FailedPrecondition, InvalidArgument
from tests.fakes import FakeDatabase, FakeUnitOfWork

P, U = int(MemoryKind.PROJECT), int(MemoryKind.USER)
LONGTERM, ARCHIVE = int(Tier.LONGTERM), int(Tier.ARCHIVE)


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def m(uow: FakeUnitOfWork) -> Memories:
    # Neither the embedder nor the vector index is read by these rules.
    return Memories(FakeDatabase(uow), JobSignals(), None, None)  # type: ignore[arg-type]


@pytest.fixture
def in_tenant() -> Iterator[None]:
    """The calls made as a key of tenant 'team' (it sees that tenant only)."""
    token = tenancy.bind(tenancy.Caller("team"))
    yield
    tenancy.reset(token)


async def create(m: Memories, **values: Any) -> int:
    values.setdefault("content", f"zebra content for {values.get('title', '')}")
    return (await m.create(values)).id


async def refused(error: type[Exception], call) -> str:
    with pytest.raises(error) as err:
        await call
    return str(err.value)


def index_jobs(uow: FakeUnitOfWork) -> list[tuple[int, str]]:
    """The pending memory index jobs (target, tenant), taken off the queue."""
    found = [(j.target_id, j.tenant) for j in uow.jobs.rows if j.kind == jobs.INDEX_MEMORY]
    uow.jobs.rows = [j for j in uow.jobs.rows if j.kind != jobs.INDEX_MEMORY]
    return found


async def test_a_memory_is_refused_by_name_and_nothing_is_written(uow, m):
    p1 = uow.projects.insert({"name": "p1"}).id
    for values, words in (
        ({"kind": U, "title": "t"}, "memory.user_id is required for a USER memory"),
        ({"kind": P, "title": "t"}, "memory.project_id is required for a PROJECT memory"),
        ({"kind": P, "title": "t", "project_id": p1, "user_id": "bob"}, "must be empty"),
        ({"title": "t", "project_id": p1}, "memory.kind must be PROJECT or USER"),
        ({"kind": P, "title": "", "project_id": p1}, "memory.title"),
        ({"kind": P, "title": "t", "project_id": p1, "confidence": 2}, "memory.confidence"),
        # Surrounding spaces would make a second owner that looks like the first.
        ({"kind": U, "title": "t", "user_id": "bob "}, "memory.user_id"),
    ):
        assert words in await refused(InvalidArgument, create(m, **values)), values
    for values, words in (
        ({"project_id": 999}, "memory.project_id 999 does not exist"),
        ({"project_id": p1, "session_id": 999}, "memory.session_id 999 does not exist"),
    ):
        assert words in await refused(FailedPrecondition, create(m, kind=P, title="t", **values))
    for scope in (MemoryScope(), MemoryScope(user_id=" bob")):
        await refused(InvalidArgument, m.list_visible(scope, 0, 0, ""))
    assert uow.memories.rows == {} and uow.jobs.rows == []


async def test_an_update_changes_only_its_mask_and_never_the_kind(uow, m):
    p1 = uow.projects.insert({"name": "p1"}).id
    mem = await create(m, kind=P, title="db port", content="postgres runs on 5432", project_id=p1)
    changes = {"title": "database port", "tier": ARCHIVE, "confidence": 0.5, "content": "ignored"}
    updated = await m.update(mem, changes, ["title", "tier", "confidence"], "")
    assert (updated.title, updated.tier, updated.confidence, updated.content) == (
        "database port",
        ARCHIVE,
        0.5,
        "postgres runs on 5432",
    )
    assert "kind" in await refused(InvalidArgument, m.update(mem, {"kind": U}, ["kind"], ""))
    assert uow.memories.rows[mem].kind == P


async def test_memories_are_listed_a_page_at_a_time(uow, m):
    p1 = uow.projects.insert({"name": "p1"}).id
    ids = [await create(m, kind=P, title=f"m{i}", project_id=p1) for i in range(5)]
    seen, token = [], ""
    while True:
        page = await m.list_visible(MemoryScope(project_id=p1), 0, 2, token)
        seen += [x.id for x in page.items]
        token = page.next_token
        if not token:
            break
    assert seen == ids


async def test_deleting_one_users_memories_leaves_anothers(m):
    alice = [await create(m, kind=U, title=f"a{i}", user_id="alice") for i in range(3)]
    bob = [await create(m, kind=U, title=f"b{i}", user_id="bob") for i in range(3)]
    for memory_id in alice:
        await m.delete(memory_id, "alice")
    page = await m.list_visible(MemoryScope(user_id="bob"), 0, 0, "")
    assert [x.id for x in page.items] == bob
    assert (await m.list_visible(MemoryScope(user_id="alice"), 0, 0, "")).items == []


async def test_memory_writes_queue_the_index_job_their_vector_needs(uow, m, in_tenant):
    """A create (unless its vector was written beside the row), an update
    and a delete each queue the memory's index job with the write; the
    delete's while the row is there, so it carries the memory's tenant."""
    p1 = uow.projects.insert({"name": "p1"}, "team").id
    mem = await create(m, kind=P, title="db port", tier=LONGTERM, project_id=p1)
    assert index_jobs(uow) == [(mem, "team")]
    await m.update(mem, {"title": "database port"}, ["title"], "")
    assert index_jobs(uow) == [(mem, "team")]
    await m.delete(mem, "")
    assert index_jobs(uow) == [(mem, "team")]
    row = {"kind": P, "title": "t", "content": "c", "project_id": p1, "tier": LONGTERM}
    row |= {"agent_id": "", "user_id": "", "session_id": 0, "confidence": 1.0, "metadata": {}}
    memory_upkeep.insert(uow, row, "", "team", embedded=True)
    assert index_jobs(uow) == []
