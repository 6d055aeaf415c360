"""PROJECT/USER memories over gRPC: CRUD, ownership, the cap and isolation.

Isolation is checked here for every kind and tier on semantic and hybrid
search (and selection, in test_selection.py); the same scopes on the list and
on keyword search are tests/unit/test_isolation_memory_paths.py's, on the fakes
(the memories and scopes both use are tests/scoped_memories.py's).

What the domain decides (a memory refused by name with nothing written, what
an update may change, listing, the index job each write queues, and the
rules of tests/unit/test_memory_*.py) is tested on the fakes; each RPC keeps
its wiring here.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.scoped_memories import memory_specs, scope_cases
from tests.support import index_idle, wait_until

# Every test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

P, U = memory_pb2.MEMORY_KIND_PROJECT, memory_pb2.MEMORY_KIND_USER
TASK, SESSION, LONGTERM, ARCHIVE = (
    memory_pb2.TIER_TASK,
    memory_pb2.TIER_SESSION,
    memory_pb2.TIER_LONGTERM,
    memory_pb2.TIER_ARCHIVE,
)


async def setup_world(h):
    p1 = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p1"))
    )
    p2 = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p2"))
    )
    s1 = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=p1.id))
    )
    s2 = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=p1.id))
    )
    return p1.id, p2.id, s1.id, s2.id


async def create(h, **kw) -> memory_pb2.Memory:
    kw.setdefault("content", f"zebra content for {kw.get('title', '')}")
    return await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(memory=memory_pb2.Memory(**kw))
    )


async def code_of(coro) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await coro
    return err.value.code()


async def test_crud_roundtrip_and_field_mask(harness):
    h = harness
    p1, _, s1, _ = await setup_world(h)
    mem = await create(
        h,
        kind=P,
        title="db port",
        content="postgres runs on 5432",
        tier=LONGTERM,
        project_id=p1,
        session_id=s1,
        agent_id="coder",
    )
    assert mem.id and mem.tier == LONGTERM and mem.confidence == 1.0 and mem.use_count == 0
    got = await h.memory.GetMemory(memory_pb2.GetMemoryRequest(id=mem.id))
    assert got.title == "db port" and got.create_time.seconds > 0
    upd = await h.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(
                id=mem.id, title="database port", tier=ARCHIVE, confidence=0.5, content="ignored"
            ),
            update_mask=FieldMask(paths=["title", "tier", "confidence"]),
        )
    )
    assert (upd.title, upd.tier, upd.confidence, upd.content) == (
        "database port",
        ARCHIVE,
        0.5,
        "postgres runs on 5432",
    )
    assert await code_of(
        h.memory.UpdateMemory(
            memory_pb2.UpdateMemoryRequest(
                memory=memory_pb2.Memory(id=mem.id, kind=U), update_mask=FieldMask(paths=["kind"])
            )
        )
    ) == (grpc.StatusCode.INVALID_ARGUMENT)
    await h.memory.DeleteMemory(memory_pb2.DeleteMemoryRequest(id=mem.id))
    assert await code_of(h.memory.GetMemory(memory_pb2.GetMemoryRequest(id=mem.id))) == (
        grpc.StatusCode.NOT_FOUND
    )


async def test_output_only_source_fields_are_ignored_unless_impossible(harness):
    """A memory read and sent back as it is (source, source_episode_id set)
    creates a client memory; a negative episode id or an unknown source is
    refused naming the field, before any limit is consulted, and writes nothing."""
    h = harness
    p1, _, _, _ = await setup_world(h)
    copied = await create(
        h,
        kind=P,
        title="t",
        project_id=p1,
        source=memory_pb2.MEMORY_SOURCE_FORMATION,
        source_episode_id=7,
    )
    assert copied.source == memory_pb2.MEMORY_SOURCE_CLIENT and copied.source_episode_id == 0
    for bad in ({"source_episode_id": -1}, {"source": 99}):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await create(h, kind=P, title="t2", project_id=p1, **bad)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"memory.{next(iter(bad))}" in err.value.details()
    n = await h.app.db.read_sql(lambda c: c.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
    assert n == 1


async def test_request_id_is_idempotent(harness):
    h = harness
    p1, _, _, _ = await setup_world(h)
    req = memory_pb2.CreateMemoryRequest(
        memory=memory_pb2.Memory(kind=P, title="t", content="c", project_id=p1), request_id="r-1"
    )
    a = await h.memory.CreateMemory(req)
    b = await h.memory.CreateMemory(req)
    assert a.id == b.id
    # The same owner reusing the key for a different memory is refused, and
    # told which field differs.
    changed = memory_pb2.CreateMemoryRequest(
        memory=memory_pb2.Memory(kind=P, title="t", content="changed", project_id=p1),
        request_id="r-1",
    )
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.CreateMemory(changed)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "content" in err.value.details()
    # The rule's other cases (the tier or agent differing, another owner's
    # key): tests/unit/test_memory_request_ids.py.


async def test_the_same_words_sent_at_once_are_stored_once(harness):
    """Identical creates arriving together (a client's retries racing, two
    agents told one fact) keep one memory: on PostgreSQL their transactions
    run side by side, and the owner's lock makes the second find the first's."""
    h = harness
    p1, *_ = await setup_world(h)
    fact = memory_pb2.Memory(kind=P, project_id=p1, title="deploy day", tier=LONGTERM,
                             content="Deploys go out on Thursdays after 14:00.")  # fmt: skip
    made = await asyncio.gather(
        *(h.memory.CreateMemory(memory_pb2.CreateMemoryRequest(memory=fact)) for _ in range(8))
    )
    assert len({m.id for m in made}) == 1
    page = await h.memory.ListMemories(
        memory_pb2.ListMemoriesRequest(scope=memory_pb2.MemoryScope(project_id=p1), page_size=100)
    )
    assert [m.id for m in page.memories if m.title == "deploy day"] == [made[0].id]


async def test_the_same_words_in_the_same_tier_and_owner_are_not_stored_twice(harness):
    """A create without a request_id (a retry, or a fact told twice) whose
    title and content are an owner's live memory's in the same tier, case and
    punctuation aside, answers with that memory, says so in x-nexus-existing,
    and stores nothing."""
    h = harness
    p1, *_ = await setup_world(h)
    fact = {"kind": P, "project_id": p1, "title": "Postgres port", "tier": LONGTERM}
    call = h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(**fact, content="Postgres runs on port 5433.")
        )
    )
    first = await call
    assert dict(await call.trailing_metadata()).get("x-nexus-existing") is None
    call = h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                **{**fact, "title": "postgres PORT"}, content="postgres runs on port 5433"
            ),
            request_id="another-call",  # a new call, not a replay of the first
        )
    )
    again = await call
    assert again.id == first.id and again.content == "Postgres runs on port 5433."
    assert (
        f"memory {first.id} already holds these words"
        in dict(await call.trailing_metadata())["x-nexus-existing"]
    )
    # The rule's other cases (beyond ASCII, what else differs, a deleted memory):
    # tests/unit/test_memory_same_words.py.


async def test_user_memory_needs_its_owner_for_get_update_delete(harness):
    h = harness
    mem = await create(h, kind=U, title="alice likes tea", user_id="alice")
    nf = grpc.StatusCode.NOT_FOUND
    # The positive case first: its owner reads it, so a NOT_FOUND below is
    # the refusal, not a memory that was never there. One refusal per RPC; the
    # rule's other case (no user at all) and that a refusal writes nothing are
    # tests/unit/test_memory_cap_and_ownership.py's.
    got = await h.memory.GetMemory(memory_pb2.GetMemoryRequest(id=mem.id, user_id="alice"))
    assert got.id == mem.id
    for uid in ("bob",):
        assert (
            await code_of(h.memory.GetMemory(memory_pb2.GetMemoryRequest(id=mem.id, user_id=uid)))
            == nf
        )
        assert (
            await code_of(
                h.memory.UpdateMemory(
                    memory_pb2.UpdateMemoryRequest(
                        memory=memory_pb2.Memory(id=mem.id, title="pwned"),
                        update_mask=FieldMask(paths=["title"]),
                        user_id=uid,
                    )
                )
            )
            == nf
        )
        assert (
            await code_of(
                h.memory.DeleteMemory(memory_pb2.DeleteMemoryRequest(id=mem.id, user_id=uid))
            )
            == nf
        )
    got = await h.memory.GetMemory(memory_pb2.GetMemoryRequest(id=mem.id, user_id="alice"))
    assert got.title == "alice likes tea"
    await h.memory.DeleteMemory(memory_pb2.DeleteMemoryRequest(id=mem.id, user_id="alice"))


async def test_cap_per_project_and_agent(harness):
    h = harness
    h.app.memories.cap = 3
    p1, p2, _, _ = await setup_world(h)
    for i in range(3):
        await create(h, kind=P, title=f"m{i}", project_id=p1, agent_id="a")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await create(h, kind=P, title="one too many", project_id=p1, agent_id="a")
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "already holds 3 PROJECT memories" in err.value.details()
    assert "limit is 3 per project and agent" in err.value.details()
    await create(h, kind=P, title="other agent", project_id=p1, agent_id="b")
    await create(h, kind=P, title="other project", project_id=p2, agent_id="a")


async def test_list_pagination(harness):
    h = harness
    p1, _, _, _ = await setup_world(h)
    ids = [(await create(h, kind=P, title=f"m{i}", project_id=p1)).id for i in range(5)]
    seen, token = [], ""
    while True:
        page = await h.memory.ListMemories(
            memory_pb2.ListMemoriesRequest(
                scope=memory_pb2.MemoryScope(project_id=p1), page_size=2, page_token=token
            )
        )
        seen += [x.id for x in page.memories]
        token = page.next_page_token
        if not token:
            break
    assert seen == ids
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.ListMemories(memory_pb2.ListMemoriesRequest())
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "scope needs a project_id or a user_id" in err.value.details()


async def _visible_on_vector_paths(
    h, scope: memory_pb2.MemoryScope, query: str = "zebra"
) -> dict[str, set]:
    found = {}
    for name, mode in (
        ("semantic", memory_pb2.SEARCH_MODE_SEMANTIC),
        ("hybrid", memory_pb2.SEARCH_MODE_HYBRID),
    ):
        hits = [
            x
            async for x in h.memory.SearchMemories(
                memory_pb2.SearchMemoriesRequest(query=query, scope=scope, limit=100, mode=mode)
            )
        ]
        found[name] = {x.memory.title for x in hits}
    return found


async def test_isolation_for_every_kind_and_tier_on_semantic_and_hybrid_search(harness):
    h = harness
    p1, p2, s1, s2 = await setup_world(h)
    specs = memory_specs(p1, p2, s1, s2)
    for title, fields in specs.items():
        await create(h, title=title, **fields)
    await wait_until(lambda: index_idle(h))

    cases = scope_cases(memory_pb2.MemoryScope, p1, p2, s1, s2)
    for scope, expected in cases:
        found = await _visible_on_vector_paths(h, scope)
        assert set(found) == {"semantic", "hybrid"}
        for path, titles in found.items():
            assert titles == expected, (path, scope)


async def test_semantic_hits_are_rechecked_against_sqlite(harness):
    """A stale point (payload says alice's, row now bob's) must not leak."""
    h = harness
    mem = await create(h, kind=U, title="zebra secret", user_id="alice")
    await wait_until(lambda: index_idle(h))
    search = memory_pb2.SearchMemoriesRequest(
        query="zebra secret",
        scope=memory_pb2.MemoryScope(user_id="alice"),
        mode=memory_pb2.SEARCH_MODE_SEMANTIC,
    )
    # The positive case first: while the row is alice's, the point finds it.
    assert [x.memory.id async for x in h.memory.SearchMemories(search)] == [mem.id]
    await h.app.db.write_sql(
        lambda c: c.execute("UPDATE memories SET user_id = 'bob' WHERE id = ?", (mem.id,))
    )
    hits = [
        x
        async for x in h.memory.SearchMemories(
            memory_pb2.SearchMemoriesRequest(
                query="zebra secret",
                scope=memory_pb2.MemoryScope(user_id="alice"),
                mode=memory_pb2.SEARCH_MODE_SEMANTIC,
            )
        )
    ]
    assert hits == []


async def test_search_rejects_bad_input_and_survives_fts_syntax(harness):
    h = harness
    p1, _, _, _ = await setup_world(h)
    await create(h, kind=P, title='quote " star * paren (', project_id=p1)
    hits = [
        x
        async for x in h.memory.SearchMemories(
            memory_pb2.SearchMemoriesRequest(
                query='"star* (paren NEAR',
                scope=memory_pb2.MemoryScope(project_id=p1),
                mode=memory_pb2.SEARCH_MODE_KEYWORD,
            )
        )
    ]
    assert len(hits) == 1
    with pytest.raises(grpc.aio.AioRpcError) as err:
        [
            x
            async for x in h.memory.SearchMemories(
                memory_pb2.SearchMemoriesRequest(
                    query="  ", scope=memory_pb2.MemoryScope(project_id=p1)
                )
            )
        ]
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
