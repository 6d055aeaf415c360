"""Every way a memory can be deleted honours USER ownership, on both stores.

Alice's USER memory of tier TASK lives on a session of a project her tenant
shares with Carol, whose key may act only for Carol. The probe found Carol
deleting it through the session: ``DeleteSession``, or a one-second
``retention`` on the project and the sweep (after which ``DeleteProject``,
refused before, went through). Here, over the wire: DeleteMemory,
DeleteSession and UpdateMemory's expiry as Carol, refused (the status and
message), and Alice's memory and its history stay. The other paths (Carol's
DeleteProject, a retention Carol sets, a session Carol moves into a project
with one) are tested on the use cases and the sweep, on the fakes, in
tests/unit/test_erasure_deletes.py; DeleteProject's refusal over the wire in
tests/e2e/api/test_tenants.py.
"""

from __future__ import annotations

import json
import time

import grpc
import grpc.aio
import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import Harness, bearer, start_harness, wait_until

# Every test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

ALICE_KEY = "ownership-alice-key-00001"
CAROL_KEY = "ownership-carol-key-00001"
ALICE, CAROL = bearer(ALICE_KEY), bearer(CAROL_KEY)
TASK = memory_pb2.TIER_TASK


@pytest.fixture
async def team(tmp_path, store_settings):
    """One tenant, two keys: each may act only for its own user."""
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": ALICE_KEY, "name": "alice-app", "users": ["alice"], "tenant": "team"},
                    {"key": CAROL_KEY, "name": "carol-app", "users": ["carol"], "tenant": "team"},
                ]
            }
        )
    )
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys), **store_settings)
    yield h
    await h.close()


async def _world(h: Harness) -> dict[str, int]:
    """A project, a session in it with an episode, Alice's TASK memory on it
    (changed once, so it has history) and a PROJECT TASK memory beside it."""
    m = h.memory
    project = await m.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="atlas")), metadata=ALICE
    )
    session = await m.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id)),
        metadata=ALICE,
    )
    await m.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message="plan the trip"),
        metadata=ALICE,
    )
    mine = await m.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER,
                user_id="alice",
                project_id=project.id,
                session_id=session.id,
                tier=TASK,
                title="window seat",
                content="Alice wants a window seat",
            )
        ),
        metadata=ALICE,
    )
    await m.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=mine.id, content="Alice wants a window seat, front"),
            update_mask=FieldMask(paths=["content"]),
            user_id="alice",
            session_id=session.id,
        ),
        metadata=ALICE,
    )
    shared = await m.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_PROJECT,
                project_id=project.id,
                session_id=session.id,
                tier=TASK,
                title="book by friday",
                content="tickets by friday",
            )
        ),
        metadata=CAROL,
    )
    return {
        "project": project.id,
        "session": session.id,
        "alice": mine.id,
        "project_memory": shared.id,
    }


async def alice_still_has_it(h: Harness, ids: dict[str, int]) -> None:
    """Alice reads her memory and its history as before."""
    got = await h.memory.GetMemory(
        memory_pb2.GetMemoryRequest(id=ids["alice"], user_id="alice", session_id=ids["session"]),
        metadata=ALICE,
    )
    assert got.content == "Alice wants a window seat, front"
    history = await h.memory.ListMemoryHistory(
        memory_pb2.ListMemoryHistoryRequest(
            memory_id=ids["alice"], user_id="alice", session_id=ids["session"]
        ),
        metadata=ALICE,
    )
    assert [r.previous.content for r in history.revisions] == ["Alice wants a window seat"]


async def rows(h: Harness, table: str) -> int:
    return await h.app.db.read_sql(
        lambda c: int(c.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    )


async def refused(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value


async def test_delete_memory_of_another_user_is_not_found(team):
    h = team
    ids = await _world(h)
    as_carol = memory_pb2.DeleteMemoryRequest(
        id=ids["alice"], user_id="carol", session_id=ids["session"]
    )
    assert (await refused(h.memory.DeleteMemory(as_carol, metadata=CAROL))).code() == (
        grpc.StatusCode.NOT_FOUND
    )
    as_alice = memory_pb2.DeleteMemoryRequest(
        id=ids["alice"], user_id="alice", session_id=ids["session"]
    )
    assert (await refused(h.memory.DeleteMemory(as_alice, metadata=CAROL))).code() == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    await alice_still_has_it(h, ids)


async def test_delete_session_is_refused_while_another_users_task_memory_is_on_it(team):
    h = team
    ids = await _world(h)
    before = [await rows(h, t) for t in ("sessions", "episodes", "memories", "memory_history")]
    err = await refused(
        h.memory.DeleteSession(memory_pb2.DeleteSessionRequest(id=ids["session"]), metadata=CAROL)
    )
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"session {ids['session']} still holds TASK-tier USER memories" in err.details()
    assert "1 of users this key may not act for" in err.details()
    assert "alice" not in err.details()  # another user's name is not Carol's to learn
    assert [await rows(h, t) for t in ("sessions", "episodes", "memories", "memory_history")] == (
        before
    )
    await alice_still_has_it(h, ids)
    # Alice's key may act for every owner of the session's TASK memories: it
    # deletes the session, and they go with it.
    await h.memory.DeleteSession(memory_pb2.DeleteSessionRequest(id=ids["session"]), metadata=ALICE)
    assert await rows(h, "memories") == 0


@pytest.mark.timeout(60)
async def test_only_her_own_key_sets_when_her_memory_expires(team):
    h = team
    ids = await _world(h)
    soon = Timestamp(seconds=int(time.time()) + 2)

    def expire(user: str) -> memory_pb2.UpdateMemoryRequest:
        return memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=ids["alice"], expire_time=soon),
            update_mask=FieldMask(paths=["expire_time"]),
            user_id=user,
            session_id=ids["session"],
        )

    err = await refused(h.memory.UpdateMemory(expire("alice"), metadata=CAROL))
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    err = await refused(h.memory.UpdateMemory(expire("carol"), metadata=CAROL))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert await rows(h, "jobs WHERE kind = 'expire:memory'") == 0
    await alice_still_has_it(h, ids)
    # Alice's own key sets it, and the expiry job removes it then.
    await h.memory.UpdateMemory(expire("alice"), metadata=ALICE)

    async def expired() -> bool:
        n = await h.app.db.read_sql(
            lambda c: c.execute(
                "SELECT COUNT(*) FROM memories WHERE id = ?", (ids["alice"],)
            ).fetchone()[0]
        )
        return n == 0

    await wait_until(expired, timeout=30)
