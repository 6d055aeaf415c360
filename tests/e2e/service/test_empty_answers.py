"""Empty answers say why over gRPC, each RPC's trailer (x-nexus-empty-reason):
ListMemories, SearchMemories, SelectMemories and SearchEntities without an
LLM, SearchEpisodes with nothing stored and with nothing matched (each
store's keyword search), no reason on an answer with something in it, and a
selection the model made empty; SelectMemories always says its method
(x-nexus-selection-method), also when it selects nothing.

The reasons themselves (no LLM, formation off, jobs pending with an LLM,
nothing stored told apart from nothing matched, another tenant's project
heard as a missing one) are decided by domain/empty_answers.py and tested
on the fakes in tests/unit/test_episode_empty_answers.py."""

from __future__ import annotations

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.ollama_stub import Reply

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

    # An answer with something in it says nothing of the kind.
    scope = memory_pb2.MemoryScope(project_id=pid)
    await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=pid, title="port",
                content="Postgres runs on port 5433",
            )
        )
    )  # fmt: skip
    call = h.memory.ListMemories(memory_pb2.ListMemoriesRequest(scope=scope))
    assert len((await call).memories) == 1
    assert REASON not in await trailers_of(call)


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
