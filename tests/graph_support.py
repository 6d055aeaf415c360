"""Helpers of the graph and extraction tests: a harness wired to the Ollama
stand-in with fast retries, the canned extraction answers (and ``answer`` to
write one, ``script`` to give it to an episode's extraction), short-hand
calls that create a project, a session or an episode (``say``: one whose
extraction is done), and a project's entities. Not a test module: the entity
resolution and graph tests (tests/e2e/service/test_entity_resolution.py,
test_graph_time_and_merges.py, ...) share them."""

from __future__ import annotations

import uuid
from dataclasses import replace

import grpc
import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.ollama_stub import OllamaStub
from tests.support import Harness, start_harness, take

EMPTY = {"entities": [], "relationships": []}
ALICE = {
    "entities": [
        {"name": "Alice", "type": "person", "notes": "Leads the Atlas project"},
        {"name": "Atlas", "type": "project", "notes": None},
    ],
    "relationships": [{"from": "Alice", "to": "Atlas", "label": "leads", "notes": None}],
}


def speed_up(h: Harness, **overrides) -> None:
    """Fast backoff, so retry tests take milliseconds instead of seconds."""
    w = h.app.extraction_worker
    w.config = replace(
        w.config,
        **{"backoff_base": 0.02, "backoff_max": 0.1, "postpone_delay": 0.05, **overrides},
    )


async def start_graph_harness(data_dir, stub: OllamaStub, **kw) -> Harness:
    h = await start_harness(
        data_dir, ollama_url=stub.url, **{"job_max_attempts": 3, "llm_timeout": 10.0, **kw}
    )
    speed_up(h)
    return h


async def new_project(h: Harness, name: str = "") -> memory_pb2.Project:
    """A project called ``name``; a name of its own when none is given (a
    project's name is unique in its tenant)."""
    return await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(
            project=memory_pb2.Project(name=name or f"proj {uuid.uuid4().hex[:8]}")
        )
    )


async def new_session(h: Harness, project_id: int = 0) -> memory_pb2.Session:
    return await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project_id))
    )


async def new_episode(
    h: Harness, session_id: int, user: str = "hi", ai: str = "ok"
) -> memory_pb2.Episode:
    return await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session_id, user_message=user, ai_response=ai)
    )


async def event_for(h: Harness, episode_id: int, limit: float = 10.0) -> graph_pb2.ExtractionEvent:
    call = h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(episode_id=episode_id))
    try:
        [event] = await take(call, 1, limit)
        return event
    finally:
        call.cancel()


async def expect_status(coro, code: grpc.StatusCode, text: str = "") -> str:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await coro
    assert info.value.code() == code, info.value.details()
    assert text in info.value.details(), info.value.details()
    return info.value.details()


def answer(entities, relationships=(), ended=()):
    """An extraction's answer: entities as (name, type, notes), facts as
    (from, label, to), ended facts alike."""
    return {
        "entities": [{"name": n, "type": t, "notes": notes} for n, t, notes in entities],
        "relationships": [
            {"from": a, "to": b, "label": label, "notes": None} for a, label, b in relationships
        ],
        "ended": [{"from": a, "to": b, "label": label} for a, label, b in ended],
    }


def script(stub, user: str, reply: dict) -> None:
    """Answer the extraction of the episode whose user message is ``user``."""
    stub.add_rule(reply, contains=f"User message:\n{user}\n")


async def say(h: Harness, stub, session_id: int, user: str, reply: dict, **kw):
    """An episode saying ``user``, its extraction answered ``reply``; waits
    until it is done and returns the episode and its event."""
    script(stub, user, reply)
    ep = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=session_id, user_message=user, ai_response="Noted.", **kw
        )
    )
    event = await event_for(h, ep.id)
    assert event.status == graph_pb2.EXTRACTION_STATUS_DONE, event.error
    return ep, event


async def entities_of(h: Harness, project_id: int) -> list[graph_pb2.Entity]:
    """The project's entities (its first hundred)."""
    return list(
        (
            await h.graph.ListEntities(
                graph_pb2.ListEntitiesRequest(project_id=project_id, page_size=100)
            )
        ).entities
    )
