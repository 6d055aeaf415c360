"""SelectMemories and ListMemoryUsage over a real gRPC channel, through the
Ollama stand-in: one test per path for the wiring (the selection's fields,
the usage listing's keys and status codes, the degraded path through the real
vector index, titles read in batches the model client sends whole, the
clients' request id).

The rules behind them (which memories pass 1 is offered and which picks
survive, the used-in-thread penalty and whose thread it is, thread-less
selections, the fallback's reasons, a retry by request_id, whose usage a
listing shows and its pages) are decided on the unit tier's fakes with a
scripted model: tests/unit/test_selection_rules.py."""

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


async def test_two_pass_selection_answers_the_picks_and_records_their_usage(llm_harness, stub):
    h = llm_harness
    pid, sid = await world(h)
    a = await create(h, kind=P, project_id=pid, title="postgres port")
    b = await create(h, kind=P, project_id=pid, title="deploy steps")
    await create(h, kind=P, project_id=pid, title="backup schedule")
    scope = memory_pb2.MemoryScope(project_id=pid, session_id=sid)
    script(
        stub,
        [
            {"id": a.id, "relevance": 0.9, "category": "necessary"},
            {"id": b.id, "relevance": 0.5, "category": "supporting"},
        ],
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
    assert [x.previously_used for x in first] == [False, False]
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


async def test_usage_listing_answers_its_status_codes_and_a_users_whole_usage(llm_harness, stub):
    """ListMemoryUsage's keys and refusals over gRPC: another's memory is
    NOT_FOUND, a negative page size INVALID_ARGUMENT, and neither key lists
    the user's whole usage in the project (whose rows it is:
    tests/unit/test_selection_rules.py)."""
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
    whole = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(user_id="bob", project_id=pid, page_size=1)
    )
    assert [u.memory_id for u in whole.usage] == [mine.id] and whole.next_page_token
    rest = await h.memory.ListMemoryUsage(
        memory_pb2.ListMemoryUsageRequest(
            user_id="bob", project_id=pid, page_token=whole.next_page_token
        )
    )
    assert [u.memory_id for u in rest.usage] == [shared.id] and not rest.next_page_token
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.ListMemoryUsage(
            memory_pb2.ListMemoryUsageRequest(user_id="bob", project_id=pid, page_size=-1)
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


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
