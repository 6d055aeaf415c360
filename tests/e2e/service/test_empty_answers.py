"""Empty answers say why, when the server knows (x-nexus-empty-reason): no LLM
so nothing formed yet, formation off for the project, jobs still pending,
the model chose nothing, nothing matched; SelectMemories always says its
method (x-nexus-selection-method), also when it selects nothing."""

from __future__ import annotations

import json

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.ollama_stub import Reply
from tests.support import bearer, start_harness

# Every test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

REASON, METHOD = "x-nexus-empty-reason", "x-nexus-selection-method"
PASS1 = "You choose which stored memories"


async def world(h, user_id: str = "alice", formation: int = 0) -> tuple[int, int]:
    """A project (formation: its setting; 0, the default, USER) and a session
    of ``user_id`` in it with one exchange."""
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(
            project=memory_pb2.Project(name="p", memory_formation=formation)
        )
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(project_id=project.id, user_id=user_id)
        )
    )
    await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=session.id, user_message="I'm vegetarian now.", ai_response="Noted."
        )
    )
    return project.id, session.id


async def trailers_of(call) -> dict[str, str]:
    return dict(await call.trailing_metadata())


async def drained(call) -> tuple[list, dict[str, str]]:
    """Every message of a server stream, then its trailers."""
    items = [item async for item in call]
    return items, await trailers_of(call)


async def test_without_an_llm_empty_memories_and_entities_say_nothing_formed_yet(harness):
    h = harness
    pid, sid = await world(h)
    scope = memory_pb2.MemoryScope(project_id=pid, user_id="alice", session_id=sid)

    call = h.memory.ListMemories(memory_pb2.ListMemoriesRequest(scope=scope))
    assert list((await call).memories) == []
    reason = (await trailers_of(call))[REASON]
    assert reason.startswith("LLM_OFF: no LLM server is configured"), reason
    assert reason.endswith("1 exchange waits for memory formation"), reason

    hits, trailers = await drained(
        h.memory.SearchMemories(memory_pb2.SearchMemoriesRequest(query="vegetarian", scope=scope))
    )
    assert hits == [] and trailers[REASON].startswith("LLM_OFF: ")

    selected, trailers = await drained(
        h.memory.SelectMemories(memory_pb2.SelectMemoriesRequest(prompt="food?", scope=scope))
    )
    assert selected == []
    assert trailers[METHOD] == "semantic" and trailers[REASON].startswith("LLM_OFF: ")

    entities, trailers = await drained(
        h.graph.SearchEntities(graph_pb2.SearchEntitiesRequest(query="vegetarian", project_id=pid))
    )
    assert entities == []
    assert trailers[REASON].startswith("LLM_OFF: ") and "entity extraction" in trailers[REASON]


async def test_a_project_with_formation_off_says_so(harness):
    h = harness
    pid, sid = await world(h, formation=memory_pb2.MEMORY_FORMATION_OFF)
    call = h.memory.ListMemories(
        memory_pb2.ListMemoriesRequest(
            scope=memory_pb2.MemoryScope(project_id=pid, user_id="alice")
        )
    )
    assert list((await call).memories) == []
    reason = (await trailers_of(call))[REASON]
    assert reason.startswith(f"FORMATION_OFF: memory formation is OFF for project {pid}"), reason


async def test_nothing_stored_and_nothing_matched_are_told_apart(harness):
    h = harness
    pid, sid = await world(h, user_id="")
    other = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
    )
    hits, trailers = await drained(
        h.memory.SearchEpisodes(memory_pb2.SearchEpisodesRequest(query="tea", session_id=other.id))
    )
    assert hits == []
    assert trailers[REASON] == "NOTHING_STORED: no exchange is stored in this session yet"
    hits, trailers = await drained(
        h.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(
                query="zeppelin", session_id=sid, mode=memory_pb2.SEARCH_MODE_KEYWORD
            )
        )
    )
    assert hits == [] and trailers[REASON].startswith("NO_MATCH: none of the 1 exchange in")

    # A project that forms USER memories only, asked without a user: said.
    scope = memory_pb2.MemoryScope(project_id=pid)
    call = h.memory.ListMemories(memory_pb2.ListMemoriesRequest(scope=scope))
    await call
    assert "forms only USER memories" in (await trailers_of(call))[REASON]
    # Memories there, none matching: NO_MATCH, not "nothing stored".
    await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=pid, title="port",
                content="Postgres runs on port 5433",
            )
        )
    )  # fmt: skip
    hits, trailers = await drained(
        h.memory.SearchMemories(
            memory_pb2.SearchMemoriesRequest(
                query="zeppelin", scope=scope, mode=memory_pb2.SEARCH_MODE_KEYWORD
            )
        )
    )
    assert hits == [] and trailers[REASON].startswith("NO_MATCH: "), trailers
    call = h.memory.ListMemories(
        memory_pb2.ListMemoriesRequest(scope=scope, kind=memory_pb2.MEMORY_KIND_USER)
    )
    await call
    assert (await trailers_of(call))[REASON].startswith("NO_MATCH: ")
    # An answer with something in it says nothing of the kind.
    call = h.memory.ListMemories(memory_pb2.ListMemoriesRequest(scope=scope))
    assert len((await call).memories) == 1
    assert REASON not in await trailers_of(call)


async def test_jobs_still_pending_are_said_with_an_llm(llm_harness, stub):
    h = llm_harness
    # The model takes its time: the exchange waits for extraction, and so for formation.
    stub.add_rule(Reply.slow(60.0), contains="User message:")
    pid, sid = await world(h)
    await stub.wait_for_requests(1, 10.0, path="/api/chat")
    scope = memory_pb2.MemoryScope(project_id=pid, user_id="alice")
    call = h.memory.ListMemories(memory_pb2.ListMemoriesRequest(scope=scope))
    await call
    reason = (await trailers_of(call))[REASON]
    assert reason == "JOBS_PENDING: 1 exchange still waits for memory formation", reason
    entities, trailers = await drained(
        h.graph.SearchEntities(graph_pb2.SearchEntitiesRequest(query="food", project_id=pid))
    )
    assert trailers[REASON] == "JOBS_PENDING: 1 exchange still waits for entity extraction"


async def test_a_selection_the_model_made_empty_says_so_and_its_method(llm_harness, stub):
    h = llm_harness
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    for title in ("postgres port", "deploy steps"):
        await h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=project.id, title=title,
                    content=f"details about {title}",
                )
            )
        )  # fmt: skip
    stub.add_rule(Reply.of({"selected": []}), contains=PASS1)
    scope = memory_pb2.MemoryScope(project_id=project.id)
    selected, trailers = await drained(
        h.memory.SelectMemories(memory_pb2.SelectMemoriesRequest(prompt="weather?", scope=scope))
    )
    assert selected == []
    assert trailers[METHOD] == "llm"
    assert trailers[REASON] == (
        "MODEL_CHOSE_NONE: the selection model read the titles of 2 memories and chose none"
        " for this prompt"
    )


async def test_another_tenants_project_always_hears_nothing_stored(tmp_path, store_settings):
    """The reasons say only what the caller may read: tenant b naming tenant
    a's projects hears exactly what a project that does not exist tells,
    whatever a's settings (formation off) and backlog (exchanges waiting)."""
    keys = tmp_path / "keys.json"
    a_key, b_key = "tenant-a-key-for-reasons-01", "tenant-b-key-for-reasons-01"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": a_key, "name": "a", "users": "*"},
                    {"key": b_key, "name": "b", "users": "*"},
                ]
            }
        )
    )
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys), **store_settings)
    a, b = bearer(a_key), bearer(b_key)
    try:
        off = await h.memory.CreateProject(
            memory_pb2.CreateProjectRequest(
                project=memory_pb2.Project(
                    name="off", memory_formation=memory_pb2.MEMORY_FORMATION_OFF
                )
            ),
            metadata=a,
        )
        waiting = await h.memory.CreateProject(
            memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="waiting")),
            metadata=a,
        )
        session = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(
                session=memory_pb2.Session(project_id=waiting.id, user_id="alice")
            ),
            metadata=a,
        )
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id, user_message="I'm vegetarian now.", ai_response="Noted."
            ),
            metadata=a,
        )

        async def reasons(key, project_id: int) -> list[str]:
            scope = memory_pb2.MemoryScope(project_id=project_id, user_id="alice")
            listed = h.memory.ListMemories(
                memory_pb2.ListMemoriesRequest(scope=scope), metadata=key
            )
            await listed
            searched = h.memory.SearchMemories(
                memory_pb2.SearchMemoriesRequest(query="vegetarian", scope=scope), metadata=key
            )
            selected = h.memory.SelectMemories(
                memory_pb2.SelectMemoriesRequest(prompt="food?", scope=scope), metadata=key
            )
            out = [(await trailers_of(listed))[REASON]]
            for call in (searched, selected):
                items, trailers = await drained(call)
                assert items == []
                out.append(trailers[REASON])
            return out

        # Tenant a hears its own projects' reasons...
        assert [r.split(":")[0] for r in await reasons(a, off.id)] == ["FORMATION_OFF"] * 3
        assert [r.split(":")[0] for r in await reasons(a, waiting.id)] == ["LLM_OFF"] * 3
        # ...tenant b, naming them, what a missing project tells.
        missing = await reasons(b, 999_999)
        assert {r.split(":")[0] for r in missing} == {"NOTHING_STORED"}
        assert await reasons(b, off.id) == missing
        assert await reasons(b, waiting.id) == missing
    finally:
        await h.close()
