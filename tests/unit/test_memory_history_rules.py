"""A memory's history, who may read it and for how long (domain/memories.py
``history``, domain/memory_upkeep.py ``purge_history``), decided by the domain
on the fakes of tests/fakes.py.

Each update keeps the version it replaced with the fields it changed, each
delete the version deleted, paged oldest first; a bad request is refused
naming its field. ListMemoryHistory follows GetMemory's ownership rule, judged
for a deleted memory by the version deleted, until its history retention
ends; then the memory reads as one that never existed, whether or not the
purge job has run, and the job drops the rows. What a client sees over gRPC
(the status codes, request ids from the call's metadata, the purge worker,
the key's principal) is tests/e2e/service/test_memory_history.py's.
"""

from __future__ import annotations

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.records import DELETE, UPDATE, ChangedBy
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import memory_upkeep
from nexus_grpc.domain.memories import Memories
from nexus_grpc.errors import InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork

P, U = int(MemoryKind.PROJECT), int(MemoryKind.USER)


def memories(uow: FakeUnitOfWork) -> Memories:
    # Neither the embedder nor the vector index is read by these rules.
    return Memories(FakeDatabase(uow), JobSignals(), None, None)  # type: ignore[arg-type]


async def versions(m: Memories, memory_id: int, user_id: str = "", session_id: int = 0) -> int:
    return len((await m.history(memory_id, user_id, session_id, 0, "")).items)


async def refused(m: Memories, memory_id: int, user_id: str = "", session_id: int = 0) -> bool:
    with pytest.raises(NotFound, match=f"memory {memory_id} does not exist"):
        await m.history(memory_id, user_id, session_id, 0, "")
    return True


async def test_history_follows_get_memorys_ownership_live_or_deleted():
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}).id
    session = uow.sessions.insert("s", "", project, {}).id
    m = memories(uow)
    mine = (await m.create({"kind": U, "user_id": "alice", "title": "t", "content": "c"})).id
    task = (
        await m.create(
            {
                "kind": P,
                "project_id": project,
                "session_id": session,
                "tier": int(Tier.TASK),
                "title": "t",
                "content": "c",
            }
        )  # fmt: skip
    ).id
    for memory_id, user, ses in ((mine, "alice", 0), (task, "", session)):
        await m.update(memory_id, {"content": "c2"}, ["content"], user, ses)
        assert await versions(m, memory_id, user, ses) == 1
    # Anyone else reads it as a memory that does not exist, live or deleted.
    assert await refused(m, mine, "bob")
    assert await refused(m, mine)
    assert await refused(m, task, session_id=session + 1000)
    assert await refused(m, task)
    assert await refused(m, 10**9, "alice")
    await m.delete(mine, "alice", by=ChangedBy("req-delete-1"))
    assert await versions(m, mine, "alice") == 2
    assert await refused(m, mine, "bob")


async def test_a_deleted_memorys_history_reads_as_never_there_once_its_retention_ends():
    uow = FakeUnitOfWork()
    m = memories(uow)
    made = [
        await m.create({"kind": U, "user_id": "alice", "title": t, "content": "c"})
        for t in ("kept", "gone")
    ]
    kept, gone = (memory.id for memory in made)
    for memory_id in (kept, gone):
        await m.update(memory_id, {"content": "c2"}, ["content"], "alice")
    m.history_retention = -1.0  # ended already when the delete is written
    await m.delete(gone, "alice")
    # The purge job has not run (its rows are all there), yet the history is gone.
    assert [r.action for r in uow.memories.page(gone, None, 10)] == [UPDATE, DELETE]
    assert uow.jobs.pending(jobs.PURGE_MEMORY_HISTORY) == [gone]
    assert await refused(m, gone, "alice")
    # A live memory's history has no end.
    assert await versions(m, kept, "alice") == 1


async def test_a_deletes_history_keeps_the_version_deleted_until_its_purge_time():
    uow = FakeUnitOfWork()
    m = memories(uow)
    m.history_retention = 3600.0
    memory_id = (await m.create({"kind": U, "user_id": "alice", "title": "t", "content": "c"})).id
    await m.delete(memory_id, "alice", by=ChangedBy("req-1", "orchestrator"))
    [deleted] = uow.memories.page(memory_id, None, 10)
    assert (deleted.action, deleted.previous.content, deleted.request_id, deleted.principal) == (
        DELETE, "c", "req-1", "orchestrator",
    )  # fmt: skip
    # The purge is queued for when the retention ends, in the delete's own write.
    [job] = [j for j in uow.jobs.rows if j.kind == jobs.PURGE_MEMORY_HISTORY]
    assert job.target_id == memory_id and job.run_after == deleted.purge_after
    assert 3500 < deleted.purge_after - deleted.changed_at <= 3600


async def test_each_update_and_delete_keeps_the_version_it_replaced_paged_oldest_first():
    """An update keeps the version before it with the fields it changed (a
    masked field sent with the value it already has is no change), a delete
    the version deleted; each names its request id."""
    uow = FakeUnitOfWork()
    m = memories(uow)
    memory_id = (
        await m.create({"kind": U, "user_id": "alice", "title": "editor", "content": "uses vim"})
    ).id
    assert await versions(m, memory_id, "alice") == 0
    changes = {"content": "uses helix", "confidence": 0.5}
    await m.update(
        memory_id, changes, ["content", "confidence"], "alice", by=ChangedBy("req-update-1")
    )
    same_title = {"title": "editor", "tier": int(Tier.ARCHIVE)}
    await m.update(memory_id, same_title, ["title", "tier"], "alice")
    await m.delete(memory_id, "alice", by=ChangedBy("req-delete-1"))
    revs = (await m.history(memory_id, "alice", 0, 0, "")).items
    assert [r.action for r in revs] == [UPDATE, UPDATE, DELETE]
    first, second, deleted = revs
    assert first.changed == ["content", "confidence"]
    assert (first.previous.content, first.previous.confidence) == ("uses vim", 1.0)
    assert (first.request_id, first.principal) == ("req-update-1", "")
    assert second.changed == ["tier"]
    assert (second.previous.content, second.previous.tier) == ("uses helix", int(Tier.LONGTERM))
    assert deleted.changed == [] and deleted.previous.tier == int(Tier.ARCHIVE)
    assert deleted.request_id == "req-delete-1"
    assert first.changed_at <= deleted.changed_at
    assert all(r.memory_id == memory_id for r in revs)
    seen, token = [], ""
    while True:
        page = await m.history(memory_id, "alice", 0, 1, token)
        seen += [r.id for r in page.items]
        token = page.next_token
        if not token:
            break
    assert seen == [r.id for r in revs]


@pytest.mark.parametrize(
    ("memory_id", "user_id", "session_id", "page_size", "page_token", "field"),
    [
        (0, "", 0, 0, "", "memory_id"),
        (-3, "", 0, 0, "", "memory_id"),
        (1, "", 0, -1, "", "page_size"),
        (1, "", 0, 0, "nope", "page_token"),
        (1, " bob", 0, 0, "", "user_id"),
        (1, "", -1, 0, "", "session_id"),
    ],
)
async def test_a_bad_history_request_is_refused_naming_the_field(
    memory_id, user_id, session_id, page_size, page_token, field
):
    m = memories(FakeUnitOfWork())
    with pytest.raises(InvalidArgument, match=field):
        await m.history(memory_id, user_id, session_id, page_size, page_token)


async def test_the_purge_job_drops_a_deleted_memorys_history_once_its_retention_ends():
    uow = FakeUnitOfWork()
    m = memories(uow)
    m.history_retention = 2.0
    made = [
        await m.create({"kind": U, "user_id": "alice", "title": t, "content": "c"})
        for t in ("k", "g")
    ]
    kept, gone = (memory.id for memory in made)
    for memory_id in (kept, gone):
        await m.update(memory_id, {"content": "c2"}, ["content"], "alice")
    await m.delete(gone, "alice")
    [deleted] = [r for r in uow.memories.history.values() if r.action == DELETE]
    assert await versions(m, gone, "alice") == 2 and len(uow.memories.history) == 3
    # The job run before the retention ends drops nothing.
    memory_upkeep.purge_history(uow, gone, deleted.purge_after - 1)
    assert await versions(m, gone, "alice") == 2
    memory_upkeep.purge_history(uow, gone, deleted.purge_after)
    assert [r.memory_id for r in uow.memories.history.values()] == [kept]
    # A live memory's history is never purged, however late the job.
    memory_upkeep.purge_history(uow, kept, deleted.purge_after + 10**9)
    assert await versions(m, kept, "alice") == 1
