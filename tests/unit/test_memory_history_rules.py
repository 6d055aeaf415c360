"""Who may read a memory's history, and for how long (domain/memories.py
``history``), decided by the domain on the fakes of tests/fakes.py.

ListMemoryHistory follows GetMemory's ownership rule, judged for a deleted
memory by the version deleted, until its history retention ends; then the
memory reads as one that never existed, whether or not the purge job has run.
What a client sees over gRPC (each version, request ids, paging, the purge
job) is tests/e2e/service/test_memory_history.py's.
"""

from __future__ import annotations

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.records import DELETE, UPDATE, ChangedBy
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.memories import Memories
from nexus_grpc.errors import NotFound
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
