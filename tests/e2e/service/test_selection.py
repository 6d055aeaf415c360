"""SelectMemories (two passes through the Ollama stand-in), usage tracking,
deprioritising memories already used in the thread, semantic degradation,
and isolation on the selection path."""

from __future__ import annotations

import uuid

import grpc
import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.ollama_stub import Reply
from tests.support import index_idle, wait_until

# Every harness test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

PASS1 = "You choose which stored memories"
PASS2 = "You rank stored memories"
P, U = memory_pb2.MEMORY_KIND_PROJECT, memory_pb2.MEMORY_KIND_USER


async def world(h):
    # A name of its own: a project's name is unique in its tenant.
    p = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(
            project=memory_pb2.Project(name=f"p {uuid.uuid4().hex[:8]}")
        )
    )
    ses = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=p.id))
    )
    return p.id, ses.id


async def create(h, **kw) -> memory_pb2.Memory:
    kw.setdefault("content", f"details about {kw['title']}")
    return await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(memory=memory_pb2.Memory(**kw))
    )


async def select(h, scope, prompt="which database port?", thread="t1", summary=""):
    return [
        x
        async for x in h.memory.SelectMemories(
            memory_pb2.SelectMemoriesRequest(
                prompt=prompt, scope=scope, thread_id=thread, thread_summary=summary
            )
        )
    ]


def script(stub, pass1, pass2, times=1):
    stub.add_rule(Reply.of({"selected": pass1}), contains=PASS1, times=times)
    stub.add_rule(Reply.of({"ranked": pass2}), contains=PASS2, times=times)


async def test_two_pass_selection_records_usage_and_deprioritises_used(llm_harness, stub):
    h = llm_harness
    pid, sid = await world(h)
    a = await create(h, kind=P, project_id=pid, title="postgres port")
    b = await create(h, kind=P, project_id=pid, title="deploy steps")
    c = await create(h, kind=P, project_id=pid, title="backup schedule")
    scope = memory_pb2.MemoryScope(project_id=pid, session_id=sid)
    script(
        stub,
        [
            {"id": a.id, "relevance": 0.9, "category": "necessary"},
            {"id": b.id, "relevance": 0.5, "category": "supporting"},
            {"id": 99999, "relevance": 1.0, "category": "necessary"},
        ],  # invented: dropped
        [{"id": a.id, "relevance": 0.95}, {"id": b.id, "relevance": 0.7}],
    )
    first = await select(h, scope, summary="talking about databases")
    assert [x.memory.id for x in first] == [a.id, b.id]
    assert [x.relevance for x in first] == [0.95, 0.7]
    assert [x.category for x in first] == [
        memory_pb2.MEMORY_CATEGORY_NECESSARY,
        memory_pb2.MEMORY_CATEGORY_SUPPORTING,
    ]
    assert all(x.method == "llm" and not x.degraded_reason for x in first)
    assert first[0].memory.content == "details about postgres port"  # full content
    assert first[0].memory.use_count == 1 and first[0].memory.last_used_time.seconds > 0
    p1 = next(r for r in stub.requests if PASS1 in r.prompt_text())
    assert "postgres port" in p1.prompt_text() and "backup schedule" in p1.prompt_text()
    p2 = next(r for r in stub.requests if PASS2 in r.prompt_text())
    assert "details about postgres port" in p2.prompt_text()
    assert "talking about databases" in p2.prompt_text()

    usage = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(thread_id="t1", project_id=pid)
    )
    assert sorted(u.memory_id for u in usage.usage) == sorted([a.id, b.id])
    assert {u.context for u in usage.usage} == {"which database port?"}
    by_memory = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(memory_id=a.id, project_id=pid)
    )
    assert [u.relevance for u in by_memory.usage] == [0.95]

    # Second prompt in the same thread: a and b were used; c is fresh.
    script(
        stub,
        [
            {"id": a.id, "relevance": 0.9, "category": "necessary"},
            {"id": c.id, "relevance": 0.6, "category": "supporting"},
        ],
        [{"id": a.id, "relevance": 0.9}, {"id": c.id, "relevance": 0.6}],
    )
    second = await select(h, scope)
    assert [x.memory.id for x in second] == [c.id, a.id]
    assert [x.previously_used for x in second] == [False, True]
    assert second[1].relevance == pytest.approx(0.45)
    assert second[1].memory.use_count == 2
    p1 = [r for r in stub.requests if PASS1 in r.prompt_text()][-1].prompt_text()
    assert f"[{a.id}] postgres port  (already used in this thread)" in p1
    # Another thread starts fresh.
    script(
        stub,
        [{"id": a.id, "relevance": 0.9, "category": "necessary"}],
        [{"id": a.id, "relevance": 0.9}],
    )
    other = await select(h, scope, thread="t2")
    assert other[0].previously_used is False and other[0].relevance == 0.9


async def test_selections_without_a_thread_never_count_as_used(llm_harness, stub):
    h = llm_harness
    pid, sid = await world(h)
    a = await create(h, kind=P, project_id=pid, title="postgres port")
    scope = memory_pb2.MemoryScope(project_id=pid, session_id=sid)
    for _ in range(2):
        script(
            stub,
            [{"id": a.id, "relevance": 0.8, "category": "necessary"}],
            [{"id": a.id, "relevance": 0.8}],
        )
        [picked] = await select(h, scope, thread="")
        # Two unrelated thread-less calls: the second is not "already used".
        assert picked.previously_used is False and picked.relevance == 0.8
    assert picked.memory.use_count == 2  # the use is still counted on the memory


async def test_pass1_selecting_nothing_returns_nothing(llm_harness, stub):
    h = llm_harness
    pid, _ = await world(h)
    await create(h, kind=P, project_id=pid, title="unrelated")
    script(stub, [], [])
    assert await select(h, memory_pb2.MemoryScope(project_id=pid)) == []


async def test_without_a_model_selection_degrades_to_semantic_and_says_so(harness):
    h = harness
    pid, _ = await world(h)
    a = await create(h, kind=P, project_id=pid, title="database port", content="postgres 5432")
    await create(h, kind=U, user_id="alice", title="database port of alice")
    await wait_until(lambda: index_idle(h))
    got = await select(
        h, memory_pb2.MemoryScope(project_id=pid, user_id="bob"), prompt="database port"
    )
    assert [x.memory.id for x in got] == [a.id]
    assert got[0].method == "semantic" and "no LLM" in got[0].degraded_reason
    assert got[0].memory.use_count == 1


async def test_model_failure_degrades_to_semantic(llm_harness, stub):
    h = llm_harness
    pid, _ = await world(h)
    a = await create(h, kind=P, project_id=pid, title="database port")
    await wait_until(lambda: index_idle(h))
    stub.add_rule(Reply.error_status(500, "runner crashed"), contains=PASS1)
    got = await select(h, memory_pb2.MemoryScope(project_id=pid), prompt="database port")
    assert [x.memory.id for x in got] == [a.id]
    assert got[0].method == "semantic" and "selection model failed" in got[0].degraded_reason


async def test_selection_never_offers_or_returns_anothers_memories(llm_harness, stub):
    h = llm_harness
    pid, s1 = await world(h)
    s2 = (
        await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=pid))
        )
    ).id
    alice = await create(h, kind=U, user_id="alice", title="alice secret")
    alice_task = await create(
        h,
        kind=P,
        project_id=pid,
        tier=memory_pb2.TIER_TASK,
        session_id=s2,
        title="other session task",
    )
    archived = await create(
        h, kind=P, project_id=pid, tier=memory_pb2.TIER_ARCHIVE, title="archived"
    )
    mine = await create(h, kind=U, user_id="bob", title="bob note")
    # The model "invents" the hidden ids: they must be dropped.
    picks = [
        {"id": i, "relevance": 1.0, "category": "necessary"}
        for i in (alice.id, alice_task.id, archived.id, mine.id)
    ]
    script(stub, picks, [{"id": i, "relevance": 1.0} for i in (alice.id, mine.id)])
    got = await select(h, memory_pb2.MemoryScope(project_id=pid, user_id="bob", session_id=s1))
    assert [x.memory.id for x in got] == [mine.id]
    p1 = next(r for r in stub.requests if PASS1 in r.prompt_text()).prompt_text()
    for hidden in ("alice secret", "other session task", "archived"):
        assert hidden not in p1
    alice_mem = await h.memory.GetMemory(memory_pb2.GetMemoryRequest(id=alice.id, user_id="alice"))
    assert alice_mem.use_count == 0


async def test_usage_belongs_to_the_user_and_project_that_selected(llm_harness, stub):
    h = llm_harness
    pid, _ = await world(h)
    mine = await create(h, kind=U, user_id="bob", title="bob note")
    shared = await create(h, kind=P, project_id=pid, title="shared")
    script(
        stub,
        [
            {"id": mine.id, "relevance": 0.8, "category": "necessary"},
            {"id": shared.id, "relevance": 0.7, "category": "supporting"},
        ],
        [{"id": mine.id, "relevance": 0.8}, {"id": shared.id, "relevance": 0.7}],
    )
    await select(h, memory_pb2.MemoryScope(project_id=pid, user_id="bob"), thread="tb")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.ListMemoryUsage(memory_pb2.ListMemoryUsageRequest(memory_id=mine.id))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    ok = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(memory_id=mine.id, user_id="bob", project_id=pid)
    )
    assert len(ok.usage) == 1
    # The log holds bob's prompt: nobody else sees any of the thread, not even
    # the rows of the shared PROJECT memory.
    anon = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(thread_id="tb", project_id=pid)
    )
    assert anon.usage == []
    other = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(thread_id="tb", user_id="eve", project_id=pid)
    )
    assert other.usage == []
    shared_log = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(memory_id=shared.id, user_id="eve", project_id=pid)
    )
    assert shared_log.usage == []
    own = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(thread_id="tb", user_id="bob", project_id=pid)
    )
    assert sorted(u.memory_id for u in own.usage) == sorted([mine.id, shared.id])
    assert {u.context for u in own.usage} == {"which database port?"}
    # Neither key is the user's whole usage in the project: bob's, and only his.
    whole = await h.memory.ListMemoryUsage(memory_pb2.ListMemoryUsageRequest(project_id=pid))
    assert whole.usage == []
    whole = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(user_id="bob", project_id=pid)
    )
    assert sorted(u.memory_id for u in whole.usage) == sorted([mine.id, shared.id])


async def test_usage_without_a_thread_or_memory_pages_a_users_whole_usage(llm_harness, stub):
    """ListMemoryUsage with neither key lists everything one user's selections
    recorded in one project, oldest first, in pages; another user's rows and
    another project's never appear."""
    h = llm_harness
    pid, _ = await world(h)
    other_pid, _ = await world(h)
    note = await create(h, kind=U, user_id="bob", title="bob note")
    shared = await create(h, kind=P, project_id=pid, title="shared")
    elsewhere = await create(h, kind=P, project_id=other_pid, title="elsewhere")
    picks = [
        {"id": note.id, "relevance": 0.8, "category": "necessary"},
        {"id": shared.id, "relevance": 0.7, "category": "supporting"},
    ]
    ranked = [{"id": note.id, "relevance": 0.8}, {"id": shared.id, "relevance": 0.7}]
    for thread in ("t1", "t2"):
        script(stub, picks, ranked)
        await select(h, memory_pb2.MemoryScope(project_id=pid, user_id="bob"), thread=thread)
    script(stub, picks[1:], ranked[1:])
    await select(h, memory_pb2.MemoryScope(project_id=pid, user_id="eve"), thread="t1")
    script(stub, [{"id": elsewhere.id, "relevance": 0.9, "category": "necessary"}],
           [{"id": elsewhere.id, "relevance": 0.9}])  # fmt: skip
    await select(h, memory_pb2.MemoryScope(project_id=other_pid, user_id="bob"), thread="t1")

    seen, token = [], ""
    while True:
        page = await h.memory.ListMemoryUsage(
            memory_pb2.ListMemoryUsageRequest(
                user_id="bob", project_id=pid, page_size=3, page_token=token
            )
        )
        assert len(page.usage) <= 3
        seen += page.usage
        token = page.next_page_token
        if not token:
            break
    assert [(u.thread_id, u.memory_id) for u in seen] == [
        ("t1", note.id), ("t1", shared.id), ("t2", note.id), ("t2", shared.id),
    ]  # fmt: skip
    assert [u.id for u in seen] == sorted(u.id for u in seen)
    eve = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(user_id="eve", project_id=pid)
    )
    assert [(u.thread_id, u.memory_id) for u in eve.usage] == [("t1", shared.id)]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.ListMemoryUsage(
            memory_pb2.ListMemoryUsageRequest(user_id="bob", project_id=pid, page_size=-1)
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_another_users_selections_do_not_change_my_thread(llm_harness, stub):
    """Threads belong to the (user, project) that selected: eve using the same
    thread id neither marks bob's memories as used nor reads his usage."""
    h = llm_harness
    pid, _ = await world(h)
    shared = await create(h, kind=P, project_id=pid, title="shared")
    picks = [{"id": shared.id, "relevance": 0.8, "category": "necessary"}]
    script(stub, picks, [{"id": shared.id, "relevance": 0.8}], times=2)
    await select(h, memory_pb2.MemoryScope(project_id=pid, user_id="eve"), thread="t-shared")
    [mine] = await select(
        h, memory_pb2.MemoryScope(project_id=pid, user_id="bob"), thread="t-shared"
    )
    assert not mine.previously_used
    assert mine.relevance == 0.8


async def test_titles_past_the_context_are_read_in_batches_never_cut(llm_harness, stub):
    h = llm_harness
    # A 2,048-token model: room for ~900 bytes of titles next to the prompt.
    stub.context_lengths = {"qwen2.5:3b": 2048}
    pid, sid = await world(h)
    mems = [
        await create(h, kind=P, project_id=pid, title=f"memory number {i} about " + "x" * 40)
        for i in range(40)
    ]
    first, last = mems[0], mems[-1]
    stub.add_rule(Reply.of({"ranked": []}), contains=PASS2)  # first: it names titles too
    stub.add_rule(
        Reply.of({"selected": [{"id": first.id, "relevance": 0.6, "category": "supporting"}]}),
        contains=f"[{first.id}] memory number 0 ",
    )
    stub.add_rule(
        Reply.of({"selected": [{"id": last.id, "relevance": 0.9, "category": "necessary"}]}),
        contains=f"[{last.id}] memory number 39 ",
    )
    stub.add_rule(Reply.of({"selected": []}), contains=PASS1)
    got = await select(h, memory_pb2.MemoryScope(project_id=pid, session_id=sid))
    pass1 = [r for r in stub.requests if PASS1 in r.prompt_text()]
    assert len(pass1) >= 2
    assert {x.title_batches for x in got} == {len(pass1)}
    assert {x.method for x in got} == {"llm"} and all(not x.degraded_reason for x in got)
    # Picks of every batch are merged, most relevant first.
    assert [x.memory.id for x in got] == [last.id, first.id]
    # Each batch reached the model whole: instructions and the question first.
    for r in pass1:
        assert not r.truncated and r.seen_text.startswith(PASS1)
        assert "which database port?" in r.seen_text
    offered = "".join(r.prompt_text() for r in pass1)
    assert all(f"[{x.id}] memory number" in offered for x in mems)


async def test_a_question_too_long_for_the_context_degrades_and_says_why(llm_harness, stub):
    h = llm_harness
    stub.context_lengths = {"qwen2.5:3b": 2048}
    pid, sid = await world(h)
    await create(h, kind=P, project_id=pid, title="postgres port")
    await wait_until(lambda: index_idle(h))  # the fallback searches the index
    scope = memory_pb2.MemoryScope(project_id=pid, session_id=sid)
    got = await select(h, scope, prompt="which port? " + "really " * 300)
    assert got and {x.method for x in got} == {"semantic"}
    assert "context" in got[0].degraded_reason
    assert [r for r in stub.requests if PASS1 in r.prompt_text()] == []


async def test_a_retried_selection_answers_the_first_and_records_its_usage_once(
    llm_harness, stub
):
    """Both clients retry SelectMemories as a read; a retry after a lost answer
    arrives with the request_id the client filled in. It must not count the
    selection twice, nor (the first call's picks now ranking lower in the
    thread) answer another one."""
    h = llm_harness
    pid, sid = await world(h)
    a = await create(h, kind=P, project_id=pid, title="postgres port")
    b = await create(h, kind=P, project_id=pid, title="deploy steps")
    scope = memory_pb2.MemoryScope(project_id=pid, session_id=sid)
    script(
        stub,
        [
            {"id": a.id, "relevance": 0.9, "category": "necessary"},
            {"id": b.id, "relevance": 0.5, "category": "supporting"},
        ],
        [{"id": a.id, "relevance": 0.95}, {"id": b.id, "relevance": 0.7}],
    )

    async def select_as(request_id: str, prompt: str = "which database port?", scope=scope):
        request = memory_pb2.SelectMemoriesRequest(
            prompt=prompt, scope=scope, thread_id="t1", request_id=request_id
        )
        return [x async for x in h.memory.SelectMemories(request)]

    first = await select_as("sel-1")
    chats = len(stub.requests_to("/api/chat"))
    again = await select_as("sel-1")
    assert again == first  # the same memories, relevance, categories and method
    assert len(stub.requests_to("/api/chat")) == chats, "a retry asks the model nothing"
    usage = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(thread_id="t1", project_id=pid)
    )
    assert sorted(u.memory_id for u in usage.usage) == sorted([a.id, b.id])  # once each
    got = await h.memory.GetMemory(memory_pb2.GetMemoryRequest(id=a.id))
    assert got.use_count == 1
    # The same id for another request is refused, as a create's is.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await select_as("sel-1", prompt="something else")
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "sel-1" in err.value.details()
    # A new id is a new selection: recorded, with the first call's picks now used.
    script(stub, [{"id": a.id, "relevance": 0.9, "category": "necessary"}],
           [{"id": a.id, "relevance": 0.9}])  # fmt: skip
    [fresh] = await select_as("sel-2")
    assert fresh.previously_used and fresh.memory.use_count == 2
    # An id is its owner's: another scope's selection under it is its own.
    user = await create(h, kind=U, user_id="alice", title="alice's port")
    script(stub, [{"id": user.id, "relevance": 0.8, "category": "necessary"}],
           [{"id": user.id, "relevance": 0.8}])  # fmt: skip
    [theirs] = await select_as("sel-1", scope=memory_pb2.MemoryScope(user_id="alice"))
    assert theirs.memory.id == user.id


async def test_the_clients_fill_in_a_request_id_for_selection(llm_harness, stub, monkeypatch):
    from nexus_grpc.client import NexusClient

    h = llm_harness
    pid, _ = await world(h)
    await create(h, kind=P, project_id=pid, title="postgres port")
    seen: list[str] = []
    real = h.app.selector.select

    def spy(*args, **kwargs):
        seen.append(args[5] if len(args) > 5 else kwargs.get("request_id", ""))
        return real(*args, **kwargs)

    monkeypatch.setattr(h.app.selector, "select", spy)
    async with NexusClient(h.target) as client:
        scope = memory_pb2.MemoryScope(project_id=pid)
        async for _ in client.select_memories(prompt="port?", scope=scope):
            pass
    assert len(seen) == 1 and len(seen[0]) >= 16
