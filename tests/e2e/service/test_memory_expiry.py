"""Memory expiry over gRPC: expire_time or ttl on create, hidden from every read
from the moment it expires, removed with its index point by a durable job.
The domain's rules (what expiry is refused, where each write puts the job,
what the job does, the cap, an expired memory missing by id and from the
listing before the job runs) are tests/unit/test_memory_expiry_rules.py's,
an expired memory hidden from keyword search
tests/unit/test_search_rules_retention_keyword.py's, and the TASK-tier
memories that go with a deleted session tests/unit/test_isolation_session_memories.py's
(DeleteSession's wiring: tests/e2e/service/test_conversations.py). These are
the wiring: the RPCs' status codes, the semantic path and selection hiding
it, the worker removing the row and its point."""

from __future__ import annotations

import time

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.domain import vector_collections
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import wait_until

# Every harness test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

P, U = memory_pb2.MEMORY_KIND_PROJECT, memory_pb2.MEMORY_KIND_USER


def ts(seconds: float) -> Timestamp:
    t = Timestamp()
    t.FromNanoseconds(int(seconds * 1e9))
    return t


async def code_of(coro) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await coro
    return err.value.code(), err.value.details()


async def rows(h, sql, *params):
    return await h.app.db.read_sql(lambda c: [tuple(r) for r in c.execute(sql, params)])


async def seen_everywhere(h, project_id: int, user: str) -> dict[str, set[int]]:
    scope = memory_pb2.MemoryScope(project_id=project_id, user_id=user)
    listed = await h.memory.ListMemories(memory_pb2.ListMemoriesRequest(scope=scope, page_size=100))
    found = {"list": {x.id for x in listed.memories}}
    # Keyword search: tests/unit/test_search_rules_retention_keyword.py.
    hits = h.memory.SearchMemories(
        memory_pb2.SearchMemoriesRequest(
            query="zebra", scope=scope, limit=50, mode=memory_pb2.SEARCH_MODE_SEMANTIC
        )
    )
    found["semantic"] = {x.memory.id async for x in hits}
    selected = h.memory.SelectMemories(
        memory_pb2.SelectMemoriesRequest(prompt="zebra?", scope=scope, limit=50)
    )
    found["select"] = {x.memory.id async for x in selected}
    return found


async def indexed(h) -> None:
    async def idle():
        [(n,)] = await rows(
            h,
            "SELECT COUNT(*) FROM jobs WHERE kind = 'index:memories'"
            " AND state IN ('pending', 'running')",
        )
        return n == 0

    await wait_until(idle)


async def test_an_expired_memory_is_hidden_at_once_before_the_job_removes_it(harness):
    h = harness
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    keep = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=P, project_id=project.id, title="zebra kept", content="zebra"
            )
        )
    )
    later = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=U,
                user_id="alice",
                project_id=project.id,
                title="zebra soon",
                content="zebra",
                ttl=Duration(seconds=3600),
            )
        )
    )
    assert abs(later.expire_time.seconds - (time.time() + 3600)) < 5
    await indexed(h)
    both = {keep.id, later.id}
    assert all(v == both for v in (await seen_everywhere(h, project.id, "alice")).values())
    # Time passes for this memory only: its expiry is now in the past, while the
    # job that removes it is still an hour away.
    await h.app.db.write_sql(
        lambda c: c.execute(
            "UPDATE memories SET expire_at = ? WHERE id = ?", (time.time() - 1, later.id)
        )
    )
    seen = await seen_everywhere(h, project.id, "alice")
    assert all(v == {keep.id} for v in seen.values()), seen
    # By id it reads as missing (UpdateMemory and DeleteMemory too, and the
    # listing: tests/unit/test_memory_expiry_rules.py).
    code, _ = await code_of(
        h.memory.GetMemory(memory_pb2.GetMemoryRequest(id=later.id, user_id="alice"))
    )
    assert code == grpc.StatusCode.NOT_FOUND
    assert await rows(h, "SELECT id FROM memories WHERE id = ?", later.id) == [(later.id,)]


async def test_the_expiry_job_removes_the_row_and_its_point_and_keeps_history(harness):
    h = harness
    mem = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=U, user_id="alice", title="zebra", content="brief", ttl=Duration(seconds=1)
            )
        )
    )
    lasting = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(kind=U, user_id="alice", title="z", content="c")
        )
    )

    async def removed():
        return not await rows(h, "SELECT id FROM memories WHERE id = ?", mem.id)

    await wait_until(removed, timeout=20)
    await indexed(h)
    memories = vector_collections.MEMORIES.name
    points = await h.app.index.retrieve_ids(memories, [mem.id, lasting.id])
    assert points == {lasting.id}
    revs = (
        await h.memory.ListMemoryHistory(
            memory_pb2.ListMemoryHistoryRequest(memory_id=mem.id, user_id="alice")
        )
    ).revisions
    assert [r.change for r in revs] == [memory_pb2.MEMORY_CHANGE_EXPIRE]
    assert revs[0].previous.content == "brief"


async def test_expiry_can_be_moved_and_cleared_by_update(harness):
    h = harness
    mem = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=U,
                user_id="alice",
                title="t",
                content="c",
                expire_time=ts(time.time() + 3600),
            )
        )
    )
    [(due,)] = await rows(
        h, "SELECT run_after FROM jobs WHERE kind = 'expire:memory' AND target_id = ?", mem.id
    )
    assert abs(due - (time.time() + 3600)) < 5
    soon = await h.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=mem.id, expire_time=ts(time.time() + 60)),
            update_mask=FieldMask(paths=["expire_time"]),
            user_id="alice",
        )
    )
    assert abs(soon.expire_time.seconds - (time.time() + 60)) < 5
    cleared = await h.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=mem.id),
            update_mask=FieldMask(paths=["expire_time"]),
            user_id="alice",
        )
    )
    assert not cleared.HasField("expire_time")
    # Where each write puts the job, and what the job does with a memory that
    # no longer expires: tests/unit/test_memory_expiry_rules.py.


async def test_bad_expiry_is_refused_by_name_and_writes_nothing(harness):
    h = harness
    base = dict(kind=U, user_id="alice", title="t", content="c")
    # The domain's refusals (a ttl not positive or over 100 years, a past
    # expire_time) are tests/unit/test_memory_expiry_rules.py's; one shows
    # their wiring, the others are the messages' own range checks.
    for memory, field in (
        (memory_pb2.Memory(**base, ttl=Duration(seconds=0)), "memory.ttl"),
        (memory_pb2.Memory(**base, ttl=Duration(seconds=1, nanos=-1)), "memory.ttl"),
        (memory_pb2.Memory(**base, expire_time=Timestamp(seconds=1, nanos=-1)), "expire_time"),
    ):
        code, details = await code_of(
            h.memory.CreateMemory(memory_pb2.CreateMemoryRequest(memory=memory))
        )
        assert code == grpc.StatusCode.INVALID_ARGUMENT and field in details, details
    assert await rows(h, "SELECT id FROM memories") == []
    assert await rows(h, "SELECT id FROM jobs WHERE kind = 'expire:memory'") == []
