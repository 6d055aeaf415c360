"""An empty graph says why over gRPC (ListEntities' first page, unfiltered,
sends x-nexus-empty-reason, on both stores' backlog counts): nothing stored
yet, exchanges waiting for an LLM; a filtered or non-empty listing sends
none. The reasons themselves (every wording, another tenant's project or
session, extraction that found nothing, a session's own graph) are decided on
the unit tier's fakes: tests/unit/test_graph_empty_reasons.py."""

from __future__ import annotations

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

# Every test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

REASON = "x-nexus-empty-reason"


async def listed(h, **fields) -> tuple[list, dict[str, str]]:
    call = h.graph.ListEntities(graph_pb2.ListEntitiesRequest(**fields))
    answer = await call
    return list(answer.entities), dict(await call.trailing_metadata())


async def test_an_empty_graph_says_why_and_a_missing_project_reads_the_same(harness):
    h = harness
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="empty"))
    )
    entities, trailers = await listed(h, project_id=project.id)
    assert entities == []
    nothing = trailers[REASON]
    assert nothing.startswith("NOTHING_STORED: no entity is stored in this graph, and no"), nothing
    # A project that does not exist (or is another tenant's) says the same.
    assert (await listed(h, project_id=project.id + 1000))[1][REASON] == nothing

    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message="I moved to Porto.")
    )
    waiting = (await listed(h, project_id=project.id))[1][REASON]
    assert waiting.startswith("LLM_OFF: no LLM server is configured"), waiting
    assert waiting.endswith("1 exchange waits for entity extraction"), waiting

    # A filtered listing's emptiness is the filter's: no reason is guessed.
    assert REASON not in (await listed(h, project_id=project.id, type="person"))[1]
    await h.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="Porto", type="place", project_id=project.id)
    )
    entities, trailers = await listed(h, project_id=project.id)
    assert [e.name for e in entities] == ["Porto"] and REASON not in trailers
