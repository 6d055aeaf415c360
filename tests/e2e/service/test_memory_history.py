"""A memory's history over gRPC: every update and delete keeps the version it
replaced, ListMemoryHistory pages it under GetMemory's ownership rules, and a
deleted memory's history is purged by a durable job when its retention ends.

The domain's rules (what each version keeps, the fields a bad request names,
who may read a history and for how long, what the purge job drops) are
tests/unit/test_memory_history_rules.py's; these are the wiring: the RPC's
status codes and request ids, the purge worker, a project's erasure and the
API key's principal."""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from tests.support import bearer, erasure_done, start_harness, wait_until

# Every harness test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

ALICE_KEY = "alice-orchestrator-key-0001"


def key_file(path):
    """One key, named "orchestrator", that may act for alice and bob."""
    key = {"key": ALICE_KEY, "name": "orchestrator", "users": ["alice", "bob"]}
    path.write_text(json.dumps({"keys": [key]}))
    return path


P, U = memory_pb2.MEMORY_KIND_PROJECT, memory_pb2.MEMORY_KIND_USER


async def code_of(coro) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await coro
    return err.value.code(), err.value.details()


async def history(h, memory_id, user_id="", session_id=0, page_size=0, token="", metadata=None):
    return await h.memory.ListMemoryHistory(
        memory_pb2.ListMemoryHistoryRequest(
            memory_id=memory_id,
            user_id=user_id,
            session_id=session_id,
            page_size=page_size,
            page_token=token,
        ),
        metadata=metadata,
    )


async def history_rows(h) -> int:
    return await h.app.db.read_sql(
        lambda c: c.execute("SELECT COUNT(*) FROM memory_history").fetchone()[0]
    )


async def test_updates_and_delete_keep_each_previous_version(harness):
    h = harness
    mem = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(kind=U, user_id="alice", title="editor", content="uses vim")
        )
    )
    assert (await history(h, mem.id, "alice")).revisions == []
    await h.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=mem.id, content="uses helix", confidence=0.5),
            update_mask=FieldMask(paths=["content", "confidence"]),
            user_id="alice",
        ),
        metadata=(("x-request-id", "req-update-1"),),
    )
    # A masked field set to the value it already has is not a change.
    await h.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=mem.id, title="editor", tier=memory_pb2.TIER_ARCHIVE),
            update_mask=FieldMask(paths=["title", "tier"]),
            user_id="alice",
        )
    )
    await h.memory.DeleteMemory(
        memory_pb2.DeleteMemoryRequest(id=mem.id, user_id="alice"),
        metadata=(("x-request-id", "req-delete-1"),),
    )
    revs = (await history(h, mem.id, "alice")).revisions
    assert [r.change for r in revs] == [
        memory_pb2.MEMORY_CHANGE_UPDATE,
        memory_pb2.MEMORY_CHANGE_UPDATE,
        memory_pb2.MEMORY_CHANGE_DELETE,
    ]
    first, second, deleted = revs
    assert list(first.changed_fields) == ["content", "confidence"]
    assert (first.previous.content, first.previous.confidence) == ("uses vim", 1.0)
    assert first.request_id == "req-update-1" and first.principal == ""
    assert list(second.changed_fields) == ["tier"]
    assert (
        second.previous.content == "uses helix" and second.previous.tier == memory_pb2.TIER_LONGTERM
    )
    assert list(deleted.changed_fields) == []
    assert deleted.previous.tier == memory_pb2.TIER_ARCHIVE and deleted.request_id == "req-delete-1"
    assert first.change_time.ToNanoseconds() <= deleted.change_time.ToNanoseconds()
    assert all(r.memory_id == mem.id for r in revs)
    # Paged oldest first.
    seen, token = [], ""
    while True:
        page = await history(h, mem.id, "alice", page_size=1, token=token)
        seen += [r.id for r in page.revisions]
        token = page.next_page_token
        if not token:
            break
    assert seen == [r.id for r in revs]
    # A bad request's refusal (the others: tests/unit/test_memory_history_rules.py).
    code, details = await code_of(history(h, 0))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "memory_id" in details


async def test_a_deleted_memorys_history_is_purged_when_its_retention_ends(harness):
    h = harness
    h.app.memories.history_retention = 2.0
    keep = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(kind=U, user_id="alice", title="k", content="c")
        )
    )
    gone = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(kind=U, user_id="alice", title="g", content="c")
        )
    )
    for mem in (keep, gone):
        await h.memory.UpdateMemory(
            memory_pb2.UpdateMemoryRequest(
                memory=memory_pb2.Memory(id=mem.id, content="c2"),
                update_mask=FieldMask(paths=["content"]),
                user_id="alice",
            )
        )
    await h.memory.DeleteMemory(memory_pb2.DeleteMemoryRequest(id=gone.id, user_id="alice"))
    assert len((await history(h, gone.id, "alice")).revisions) == 2
    assert await history_rows(h) == 3

    async def purged() -> bool:
        return await history_rows(h) == 1

    await wait_until(purged, timeout=20)
    code, _ = await code_of(history(h, gone.id, "alice"))
    assert code == grpc.StatusCode.NOT_FOUND
    # A live memory's history is never purged.
    assert len((await history(h, keep.id, "alice")).revisions) == 1


async def test_deleting_a_project_takes_its_memories_history(harness):
    h = harness
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    mem = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(kind=P, project_id=project.id, title="t", content="c")
        )
    )
    await h.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=mem.id, content="c2"),
            update_mask=FieldMask(paths=["content"]),
        )
    )
    assert await history_rows(h) == 1
    deleted = await h.memory.DeleteProject(memory_pb2.DeleteProjectRequest(id=project.id))
    await erasure_done(h, deleted.erasure_id)
    assert await history_rows(h) == 0


async def test_history_names_the_api_keys_principal_when_auth_is_on(tmp_path):
    h = await start_harness(tmp_path / "data", auth_keys_file=str(key_file(tmp_path / "keys.json")))
    try:
        stub = memory_grpc.MemoryServiceStub(h.channel)
        md = bearer(ALICE_KEY)
        mem = await stub.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(kind=U, user_id="alice", title="t", content="c")
            ),
            metadata=md,
        )
        await stub.UpdateMemory(
            memory_pb2.UpdateMemoryRequest(
                memory=memory_pb2.Memory(id=mem.id, content="c2"),
                update_mask=FieldMask(paths=["content"]),
                user_id="alice",
            ),
            metadata=md,
        )
        [rev] = (await history(h, mem.id, "alice", metadata=md)).revisions
        assert rev.principal == "orchestrator" and rev.request_id
    finally:
        await h.close()
