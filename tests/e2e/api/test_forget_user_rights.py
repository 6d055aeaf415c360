"""Who may forget and export a user, over the wire on both stores: another
tenant's key hears of a user who holds nothing (NOT_FOUND, one message, on
ForgetUser and ExportUser) and nothing changes; a user key forgets its own
user and reads only its receipts; ListErasures is an admin's (PERMISSION_DENIED
to any other key) and lists its tenant's. Every key's case (another user's
key, each key of another tenant, a tenant forgetting only its own user) is
tested on the use cases, on the fakes, in tests/unit/test_forget_rights.py."""

from __future__ import annotations

import json

import grpc
import grpc.aio
import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.store import schema
from tests.support import Harness, bearer, erasure_done, index_idle, start_harness, wait_until

BOTH_STORES = True

KEYS = {
    "a-alice": ("alice-key-000000000000001", {"users": ["alice"], "tenant": "A"}),
    "a-carol": ("carol-key-000000000000001", {"users": ["carol"], "tenant": "A"}),
    "a-star": ("a-star-key-00000000000001", {"users": "*", "tenant": "A"}),
    "a-admin": ("a-admin-key-0000000000001", {"admin": True, "tenant": "A"}),
    "b-star": ("b-star-key-00000000000001", {"users": "*", "tenant": "B"}),
    "b-alice": ("b-alice-key-0000000000001", {"users": ["alice"], "tenant": "B"}),
    "b-admin": ("b-admin-key-0000000000001", {"admin": True, "tenant": "B"}),
}


def key(name: str):
    return bearer(KEYS[name][0])


@pytest.fixture
async def world(tmp_path, store_settings):
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps({"keys": [{"key": k, "name": n, **opts} for n, (k, opts) in KEYS.items()]})
    )
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys), **store_settings)
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="atlas")),
        metadata=key("a-star"),
    )
    for user, who in (("alice", "a-alice"), ("carol", "a-carol")):
        session = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(
                session=memory_pb2.Session(project_id=project.id, user_id=user)
            ),
            metadata=key(who),
        )
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id, user_message=f"{user} speaks", ai_response="ok"
            ),
            metadata=key(who),
        )
        await h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_USER,
                    user_id=user,
                    project_id=project.id,
                    title="note",
                    content=f"{user}'s note",
                )
            ),
            metadata=key(who),
        )
    h.extras["project"] = project.id
    # The digests compare rows, and an index job finishing marks its row
    # embedded: wait for them, or a refusal's test reads that as a write.
    await wait_until(lambda: index_idle(h, ("episodes", "memories")))
    yield h
    await h.close()


async def digest(h: Harness) -> list:
    def read(conn):
        return [
            sorted(tuple(map(str, r)) for r in conn.execute(f"SELECT * FROM {t.name}"))
            for t in schema.TABLES
            if t.name not in ("meta", "jobs", "llm_calls")
        ]

    return await h.app.db.read_sql(read)


async def refusal(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value.code(), err.value.details()


async def exported(h: Harness, user: str, who: str) -> list:
    return [
        r
        async for r in h.memory.ExportUser(
            memory_pb2.ExportUserRequest(user_id=user), metadata=key(who)
        )
    ]


async def test_another_tenants_key_hears_of_a_user_who_holds_nothing(world):
    """The wiring of the refusal (NOT_FOUND, one message) on ForgetUser and
    ExportUser; every key's case is tests/unit/test_forget_rights.py's."""
    h = world
    nobody = await refusal(
        h.memory.ForgetUser(memory_pb2.ForgetUserRequest(user_id="zed"), metadata=key("a-star"))
    )
    assert nobody[0] == grpc.StatusCode.NOT_FOUND
    before = await digest(h)
    for call in (
        h.memory.ForgetUser(memory_pb2.ForgetUserRequest(user_id="alice"), metadata=key("b-star")),
        exported(h, "alice", "b-star"),
    ):
        assert await refusal(call) == (nobody[0], nobody[1].replace("zed", "alice"))
    assert await digest(h) == before


async def test_a_user_key_forgets_its_own_user_and_reads_only_its_receipts(world):
    h = world
    started = await h.memory.ForgetUser(
        memory_pb2.ForgetUserRequest(user_id="alice"), metadata=key("a-alice")
    )
    assert started.user_id == "alice"
    code, _ = await refusal(
        h.memory.GetErasure(memory_pb2.GetErasureRequest(id=started.id), metadata=key("a-carol"))
    )
    assert code == grpc.StatusCode.NOT_FOUND
    receipt = await erasure_done(h, started.id, metadata=key("a-alice"))
    # The finished receipt keeps a digest, not the id: alice's key reads hers
    # back with her name; a "*" key reads it without; carol's never.
    mine = await h.memory.GetErasure(
        memory_pb2.GetErasureRequest(id=started.id), metadata=key("a-alice")
    )
    assert mine.user_id == "alice" and mine.counts == receipt.counts
    star = await h.memory.GetErasure(
        memory_pb2.GetErasureRequest(id=started.id), metadata=key("a-star")
    )
    assert star.user_id == "" and star.state == memory_pb2.ERASURE_STATE_DONE
    code, _ = await refusal(
        h.memory.GetErasure(memory_pb2.GetErasureRequest(id=started.id), metadata=key("a-carol"))
    )
    assert code == grpc.StatusCode.NOT_FOUND
    # Carol's things are all still there.
    assert any(r.HasField("memory") for r in await exported(h, "carol", "a-carol"))


async def test_only_an_admin_lists_receipts_and_only_of_its_tenant(world):
    h = world
    started = await h.memory.ForgetUser(
        memory_pb2.ForgetUserRequest(user_id="carol"), metadata=key("a-star")
    )
    await erasure_done(h, started.id, metadata=key("a-star"))
    code, _ = await refusal(
        h.memory.ListErasures(memory_pb2.ListErasuresRequest(), metadata=key("a-star"))
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED
    listed = await h.memory.ListErasures(memory_pb2.ListErasuresRequest(), metadata=key("a-admin"))
    assert [e.id for e in listed.erasures] == [started.id]
    assert listed.erasures[0].user_id == ""  # no one named the user
    named = await h.memory.ListErasures(
        memory_pb2.ListErasuresRequest(user_id="carol"), metadata=key("a-admin")
    )
    assert [(e.id, e.user_id) for e in named.erasures] == [(started.id, "carol")]
    other = await h.memory.ListErasures(
        memory_pb2.ListErasuresRequest(user_id="alice"), metadata=key("a-admin")
    )
    assert list(other.erasures) == []
    theirs = await h.memory.ListErasures(memory_pb2.ListErasuresRequest(), metadata=key("b-admin"))
    assert list(theirs.erasures) == []
