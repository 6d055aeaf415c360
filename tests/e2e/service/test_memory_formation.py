"""Memories that form themselves, through the real server with the Ollama
stand-in answering extraction (with memory candidates): the wiring of the
form:memories worker from CreateEpisode to a memory SearchMemories finds, the
two events an episode ends with on WatchExtractions (and what the formation
event says when nothing was proposed), and the project's setting and the
session's user as the RPCs take them.

Formation's rules are tested on the fakes with a scripted model: which
exchanges form and what extraction keeps for the job,
tests/unit/test_formation_rules.py; what the job keeps, merges or refuses (an
identical memory, SUPERSEDE with history, only the owner's memories shown to
the model, USER and PROJECT, time order and older news, forming again, the
cap) and the candidates' own filter, tests/unit/test_formation_job.py."""

from __future__ import annotations

import grpc
from google.protobuf.field_mask_pb2 import FieldMask

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.graph_support import EMPTY, expect_status, new_project
from tests.memory_formation_support import formed, said, script
from tests.support import Harness, take

BOTH_STORES = True
STUB_DEFAULT_REPLY = EMPTY


async def session_for(h: Harness, project_id: int, user_id: str = "", agent_id: str = ""):
    return await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(project_id=project_id, user_id=user_id, agent_id=agent_id)
        )
    )


async def tell(h: Harness, stub, session_id: int, user: str, *memories: dict):
    script(stub, user, *memories)
    ep = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=session_id,
            user_message=user,
            ai_response="Noted, thanks for telling me.",
        )
    )
    return ep, await formed(h, ep.id)


async def user_memories(h: Harness, project_id: int, user_id: str):
    page = await h.memory.ListMemories(
        memory_pb2.ListMemoriesRequest(
            scope=memory_pb2.MemoryScope(project_id=project_id, user_id=user_id),
            kind=memory_pb2.MEMORY_KIND_USER,
            page_size=100,
        )
    )
    return list(page.memories)


async def test_what_the_user_says_about_themselves_becomes_their_memory(gh, stub):
    p = await new_project(gh)
    assert p.memory_formation == memory_pb2.MEMORY_FORMATION_UNSPECIFIED  # the default: USER
    s = await session_for(gh, p.id, "alice")
    ep, event = await tell(
        gh, stub, s.id, "I'm vegetarian now, so no meat suggestions please.",
        said("The user is vegetarian.", "I'm vegetarian now"),
    )  # fmt: skip
    [op] = event.memory_formation.operations
    assert op.action == graph_pb2.MEMORY_ACTION_ADD and op.user_id == "alice"
    [memory] = await user_memories(gh, p.id, "alice")
    assert memory.id == op.memory_id and memory.content == "The user is vegetarian."
    assert memory.source == memory_pb2.MEMORY_SOURCE_FORMATION
    assert memory.source_episode_id == ep.id and memory.tier == memory_pb2.TIER_LONGTERM
    episode = await gh.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ep.id))
    assert episode.memory_state == memory_pb2.JOB_STATE_DONE
    # One call made it: the extraction's, which the candidates rode on.
    calls = stub.requests_to("/api/chat")
    assert len(calls) == 1 and "memories" in calls[0]["format"]["properties"]
    assert "lasting facts and preferences the USER states" in calls[0].prompt_text()
    # Found like any memory.
    hits = [
        h async for h in gh.memory.SearchMemories(
            memory_pb2.SearchMemoriesRequest(
                query="vegetarian", scope=memory_pb2.MemoryScope(project_id=p.id, user_id="alice")
            )
        )
    ]  # fmt: skip
    assert [h.memory.id for h in hits] == [memory.id]


async def test_an_episode_ends_with_one_event_per_stage_each_saying_which(gh, stub):
    """Extraction's event, then formation's: each says which it is, and the
    formation event says what was proposed and decided, or that nothing was."""
    p = await new_project(gh)
    s = await session_for(gh, p.id, "alice")
    ep, _ = await tell(
        gh, stub, s.id, "I'm vegetarian now, and I walk to work.",
        said("The user is vegetarian.", "I'm vegetarian now"),
        said("The user walks to work.", "I walk to work"),
    )  # fmt: skip
    call = gh.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(episode_id=ep.id))
    try:
        extracted, decided = await take(call, 2)
    finally:
        call.cancel()
    assert extracted.stage == graph_pb2.EXTRACTION_EVENT_STAGE_EXTRACTION
    assert extracted.status == graph_pb2.EXTRACTION_STATUS_DONE
    assert not extracted.HasField("memory_formation")
    assert decided.stage == graph_pb2.EXTRACTION_EVENT_STAGE_MEMORY_FORMATION
    assert decided.status == graph_pb2.EXTRACTION_STATUS_DONE
    outcome = decided.memory_formation
    assert outcome.proposed == 2 and outcome.note == ""
    assert [o.action for o in outcome.operations] == [graph_pb2.MEMORY_ACTION_ADD] * 2
    assert decided.event_id > extracted.event_id
    # Nothing proposed is said plainly, not as "something was skipped".
    _, nothing = await tell(
        gh, stub, s.id, "Hi! Could you recommend a good book?",
        said("Does the user like books?", "recommend a good book"),
    )  # fmt: skip
    assert nothing.stage == graph_pb2.EXTRACTION_EVENT_STAGE_MEMORY_FORMATION
    assert list(nothing.memory_formation.operations) == []
    assert nothing.memory_formation.proposed == 0
    assert nothing.memory_formation.note.startswith("nothing proposed")


async def test_who_forms_what_follows_the_project_and_the_session(gh, stub):
    """The project's setting and the session's user as the RPCs take them,
    and the episode's memory state CreateEpisode answers with (what then
    forms: tests/unit/test_formation_job.py)."""
    p = await new_project(gh)
    anonymous = await session_for(gh, p.id)
    ep = await gh.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=anonymous.id, user_message="I'm Dana and I love tea.", ai_response="Ok."
        )
    )
    # A session that names no user forms no USER memory.
    assert ep.memory_state == memory_pb2.JOB_STATE_UNSPECIFIED
    # A project that forms USER and PROJECT memories.
    both = await gh.memory.UpdateProject(
        memory_pb2.UpdateProjectRequest(
            project=memory_pb2.Project(
                id=p.id, memory_formation=memory_pb2.MEMORY_FORMATION_USER_AND_PROJECT
            ),
            update_mask=FieldMask(paths=["memory_formation"]),
        )
    )
    assert both.memory_formation == memory_pb2.MEMORY_FORMATION_USER_AND_PROJECT
    s = await session_for(gh, p.id, "alice", "coder")
    on = await gh.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=s.id, user_message="We deploy on Fridays.", ai_response="Ok."
        )
    )
    assert on.memory_state == memory_pb2.JOB_STATE_PENDING
    # Off: no episode is due a formation.
    await gh.memory.UpdateProject(
        memory_pb2.UpdateProjectRequest(
            project=memory_pb2.Project(id=p.id, memory_formation=memory_pb2.MEMORY_FORMATION_OFF),
            update_mask=FieldMask(paths=["memory_formation"]),
        )
    )
    off = await gh.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=s.id, user_message="I like jazz.", ai_response=""
        )
    )
    assert off.memory_state == memory_pb2.JOB_STATE_UNSPECIFIED
    # A session's user and agent never change.
    await expect_status(
        gh.memory.UpdateSession(
            memory_pb2.UpdateSessionRequest(
                session=memory_pb2.Session(id=s.id, user_id="bob"),
                update_mask=FieldMask(paths=["user_id"]),
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "cannot be updated",
    )
    await expect_status(
        gh.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session(user_id=" alice"))
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "session.user_id",
    )
