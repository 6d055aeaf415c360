"""Memories that form themselves, through the real server with the Ollama
stand-in answering extraction (with memory candidates) and formation's
decisions."""

from __future__ import annotations

import json
import re

import grpc
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.graph_support import EMPTY, expect_status, new_project
from tests.ollama_stub import Reply
from tests.support import Harness, take, wait_until

BOTH_STORES = True
STUB_DEFAULT_REPLY = EMPTY
DECISION_PROMPT = "Kept memories:"
MARCH, JUNE, JANUARY = 1_709_251_200, 1_717_200_000, 1_704_067_200


def said(content: str, quote: str, about: str = "user", tier: str = "longterm") -> dict:
    return {"about": about, "title": content[:30], "content": content, "tier": tier, "quote": quote}


def extraction(user: str, *memories: dict) -> dict:
    return {**EMPTY, "ended": [], "memories": list(memories)}


def script(stub, user: str, *memories: dict) -> None:
    stub.add_rule(extraction(user, *memories), contains=f"User message:\n{user}\n")


def decide(stub, choose) -> None:
    """Answer formation questions: ``choose(candidate content, kept
    [(id, content)]) -> (action, memory_id)``, like a careful model."""

    def respond(endpoint: str, body: dict) -> Reply | None:
        prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
        if DECISION_PROMPT not in prompt:
            return None
        decisions = []
        for block in re.split(r"(?m)^Candidate ", prompt)[1:]:
            number = int(block.split(" ", 1)[0].rstrip(":"))
            content = re.search(r': "(.*)"', block.splitlines()[0]).group(1)
            kept = [(int(i), c) for i, c in re.findall(r'- id (\d+)[^:]*: "(.*)"', block)]
            action, memory_id = choose(content, kept)
            decisions.append(
                {"candidate": number, "action": action, "memory_id": memory_id, "reason": "test"}
            )
        return Reply.of({"decisions": decisions})

    stub.responder = respond


async def session_for(h: Harness, project_id: int, user_id: str = "", agent_id: str = ""):
    return await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(project_id=project_id, user_id=user_id, agent_id=agent_id)
        )
    )


async def formed(h: Harness, episode_id: int, limit: float = 20.0) -> graph_pb2.ExtractionEvent:
    """The event that ends the episode's memory formation."""
    call = h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(episode_id=episode_id))
    try:
        while True:
            [event] = await take(call, 1, limit)
            if event.HasField("memory_formation"):
                return event
    finally:
        call.cancel()


async def tell(h: Harness, stub, session_id: int, user: str, *memories: dict, at: int = 0):
    script(stub, user, *memories)
    ep = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=session_id,
            user_message=user,
            ai_response="Noted, thanks for telling me.",
            occur_time=Timestamp(seconds=at) if at else None,
        )
    )
    return ep, await formed(h, ep.id)


async def user_memories(h: Harness, project_id: int, user_id: str, archived: bool = False):
    page = await h.memory.ListMemories(
        memory_pb2.ListMemoriesRequest(
            scope=memory_pb2.MemoryScope(
                project_id=project_id, user_id=user_id, include_archived=archived
            ),
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


async def test_a_changed_preference_supersedes_and_a_repeat_adds_nothing(gh, stub):
    p = await new_project(gh)
    s = await session_for(gh, p.id, "alice")
    _, first = await tell(
        gh, stub, s.id, "I'm vegetarian these days.",
        said("The user is vegetarian.", "I'm vegetarian these days"), at=MARCH,
    )  # fmt: skip
    old_id = first.memory_formation.operations[0].memory_id
    # Said again in other words: already known, no question asked.
    before = len(stub.requests_to("/api/chat"))
    _, again = await tell(
        gh, stub, s.id, "As I said, I am vegetarian.",
        said("The user is vegetarian.", "I am vegetarian"), at=MARCH + 60,
    )  # fmt: skip
    assert [o.action for o in again.memory_formation.operations] == [
        graph_pb2.MEMORY_ACTION_NOTHING
    ]
    assert again.memory_formation.operations[0].related_memory_id == old_id
    assert len(stub.requests_to("/api/chat")) == before + 1  # the extraction only
    # A change: the careful model says the old one no longer holds.
    decide(stub, lambda content, kept: ("SUPERSEDE", kept[0][0]))
    ep, changed = await tell(
        gh, stub, s.id, "I started eating fish again last month.",
        said("The user eats fish.", "I started eating fish again"), at=JUNE,
    )  # fmt: skip
    [op] = changed.memory_formation.operations
    assert op.action == graph_pb2.MEMORY_ACTION_SUPERSEDE and op.related_memory_id == old_id
    assert changed.memory_formation.llm_calls == 1
    live = await user_memories(gh, p.id, "alice")
    assert [m.content for m in live] == ["The user eats fish."]
    archived = [m for m in await user_memories(gh, p.id, "alice", archived=True) if m.id == old_id]
    assert archived[0].tier == memory_pb2.TIER_ARCHIVE
    history = await gh.memory.ListMemoryHistory(
        memory_pb2.ListMemoryHistoryRequest(memory_id=old_id, user_id="alice")
    )
    [entry] = history.revisions
    assert entry.episode_id == ep.id and entry.reason == "test"
    assert list(entry.changed_fields) == ["tier"]


async def test_chatter_questions_and_the_assistants_claims_form_nothing(gh, stub):
    p = await new_project(gh)
    s = await session_for(gh, p.id, "alice")
    _, event = await tell(
        gh, stub, s.id, "Hi! Could you recommend a good book?",
        # A question is not a fact, and the AI's words are not the user's.
        said("Does the user like books?", "recommend a good book"),
        said("The user loves science fiction.", "Noted, thanks for telling me"),
        said("The user greeted the assistant.", "Hi"),
    )  # fmt: skip
    assert list(event.memory_formation.operations) == []
    # Said plainly: nothing was proposed, not "something was skipped".
    assert event.stage == graph_pb2.EXTRACTION_EVENT_STAGE_MEMORY_FORMATION
    assert event.memory_formation.proposed == 0
    assert event.memory_formation.note.startswith("nothing proposed")
    assert await user_memories(gh, p.id, "alice") == []


async def test_an_episode_ends_with_one_event_per_stage_each_saying_which(gh, stub):
    """Extraction's event, then formation's: each says which it is, and the
    formation event says what was proposed and decided."""
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


async def test_a_users_facts_never_reach_another_users_prompt(gh, stub):
    p = await new_project(gh)
    alice, bob = await session_for(gh, p.id, "alice"), await session_for(gh, p.id, "bob")
    lisbon_with_cat = "The user lives in Lisbon with a cat named Miso."
    moving = "The user lives in Lisbon."
    decide(
        stub, lambda content, kept: ("SUPERSEDE", kept[0][0]) if content == moving else ("ADD", 0)
    )
    await tell(gh, stub, alice.id, "I live in Lisbon with my cat Miso.",
               said(lisbon_with_cat, "I live in Lisbon with my cat Miso"))  # fmt: skip
    await tell(
        gh, stub, alice.id, "I work from the Lisbon office.",
        said("The user works from the Lisbon office.", "I work from the Lisbon office"),
    )  # fmt: skip
    alices = await user_memories(gh, p.id, "alice")
    await tell(
        gh, stub, bob.id, "I live in Porto.", said("The user lives in Porto.", "I live in Porto")
    )
    [bobs] = await user_memories(gh, p.id, "bob")
    _, moved = await tell(
        gh, stub, bob.id, "I moved to Lisbon last week.", said(moving, "I moved to Lisbon"),
    )  # fmt: skip
    [op] = moved.memory_formation.operations
    assert op.action == graph_pb2.MEMORY_ACTION_SUPERSEDE and op.user_id == "bob"
    # Every decision prompt the stand-in received holds bob's memories only:
    # no id and no text of any of alice's (which are as similar to bob's
    # candidate as his own).
    asked = [r.prompt_text() for r in stub.requests_to("/api/chat")]
    decisions = [text for text in asked if DECISION_PROMPT in text and f'"{moving}"' in text]
    assert decisions
    for text in decisions:
        assert {int(i) for i in re.findall(r"- id (\d+)", text)} == {bobs.id}
        assert "The user lives in Porto." in text
        for m in alices:
            assert m.content not in text
    assert sorted(m.content for m in await user_memories(gh, p.id, "alice")) == sorted(
        m.content for m in alices
    )
    assert [m.content for m in await user_memories(gh, p.id, "bob")] == [
        "The user lives in Lisbon."
    ]


async def test_who_forms_what_follows_the_project_and_the_session(gh, stub):
    p = await new_project(gh)
    anonymous = await session_for(gh, p.id)
    script(stub, "I'm Dana and I love tea.", said("The user loves tea.", "I love tea"))
    ep = await gh.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=anonymous.id, user_message="I'm Dana and I love tea.", ai_response="Ok."
        )
    )
    # A session that names no user forms no USER memory, and is not asked to.
    assert ep.memory_state == memory_pb2.JOB_STATE_UNSPECIFIED

    async def asked() -> bool:
        return len(stub.requests_to("/api/chat")) == 1

    await wait_until(asked)
    assert "memories" not in stub.requests_to("/api/chat")[0]["format"]["properties"]
    # A project that forms USER and PROJECT memories: the agent's PROJECT ones too.
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
    _, event = await tell(
        gh, stub, s.id, "We deploy on Fridays, and I prefer tabs.",
        said("The project deploys on Fridays.", "We deploy on Fridays", about="project"),
        said("The user prefers tabs.", "I prefer tabs"),
    )  # fmt: skip
    kinds = {(o.user_id, o.action) for o in event.memory_formation.operations}
    assert kinds == {("", graph_pb2.MEMORY_ACTION_ADD), ("alice", graph_pb2.MEMORY_ACTION_ADD)}
    project = await gh.memory.ListMemories(
        memory_pb2.ListMemoriesRequest(
            scope=memory_pb2.MemoryScope(project_id=p.id, agent_id="coder"),
            kind=memory_pb2.MEMORY_KIND_PROJECT,
        )
    )
    assert [m.content for m in project.memories] == ["The project deploys on Fridays."]
    # Off: nothing forms, nothing is asked for.
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


async def test_imports_form_in_time_order_and_old_news_changes_nothing(gh, stub):
    p = await new_project(gh)
    s = await session_for(gh, p.id, "alice")
    script(stub, "I live in Porto now.", said("The user lives in Porto.", "I live in Porto"))
    script(stub, "I live in Lisbon.", said("The user lives in Lisbon.", "I live in Lisbon"))
    decide(stub, lambda content, kept: ("SUPERSEDE", kept[0][0]))

    def item(text: str, at: int, rid: str) -> memory_pb2.ImportEpisodesRequest:
        return memory_pb2.ImportEpisodesRequest(
            episode=memory_pb2.CreateEpisodeRequest(
                session_id=s.id, user_message=text, ai_response="Ok.", request_id=rid,
                occur_time=Timestamp(seconds=at),
            )
        )  # fmt: skip

    async def stream(*items):
        for i in items:
            yield i

    # June's exchange arrives before March's: March's forms first all the same.
    done = await gh.memory.ImportEpisodes(
        stream(item("I live in Porto now.", JUNE, "a"), item("I live in Lisbon.", MARCH, "b"))
    )
    june, march = done.episode_ids
    await formed(gh, june)
    live = await user_memories(gh, p.id, "alice")
    assert [m.content for m in live] == ["The user lives in Porto."]
    # January's, imported last, is older than what is known: it changes nothing.
    script(stub, "I live in Berlin.", said("The user lives in Berlin.", "I live in Berlin"))
    late = await gh.memory.ImportEpisodes(stream(item("I live in Berlin.", JANUARY, "c")))
    event = await formed(gh, late.episode_ids[0])
    [op] = event.memory_formation.operations
    assert op.action == graph_pb2.MEMORY_ACTION_NOTHING and "older" in op.reason
    assert [m.content for m in await user_memories(gh, p.id, "alice")] == [
        "The user lives in Porto."
    ]


async def test_forming_again_changes_nothing_and_the_cap_refuses_cleanly(gh, stub):
    p = await new_project(gh)
    s = await session_for(gh, p.id, "alice")
    ep, _ = await tell(gh, stub, s.id, "I am allergic to peanuts.",
                       said("The user is allergic to peanuts.", "allergic to peanuts"))  # fmt: skip
    await gh.graph.ExtractEpisode(graph_pb2.ExtractEpisodeRequest(episode_id=ep.id))
    rerun = await formed(gh, ep.id)
    assert [o.action for o in rerun.memory_formation.operations] in (
        [graph_pb2.MEMORY_ACTION_ADD],  # the first run's event, if replayed first
        [graph_pb2.MEMORY_ACTION_NOTHING],
    )

    async def settled() -> bool:
        e = await gh.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ep.id))
        return e.memory_state == memory_pb2.JOB_STATE_DONE

    await wait_until(settled)
    assert len(await user_memories(gh, p.id, "alice")) == 1
    # At the cap, the episode's formation is refused as a whole and says why.
    gh.app.memories.cap = 1
    capped, event = await tell(gh, stub, s.id, "I also love hiking.",
                               said("The user loves hiking.", "I also love hiking"))  # fmt: skip
    assert event.status == graph_pb2.EXTRACTION_STATUS_FAILED
    assert "memory cap" in event.error and not event.memory_formation.operations
    episode = await gh.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=capped.id))
    assert episode.memory_state == memory_pb2.JOB_STATE_FAILED
    assert "memory cap" in episode.memory_error
    assert len(await user_memories(gh, p.id, "alice")) == 1


def test_candidates_must_rest_on_the_users_own_words():
    from nexus_grpc.llm.formation_prompts import FORM_USER, parse_memories

    raw = [
        said("The user is vegetarian.", "I'm  VEGETARIAN, now"),
        said("The user likes jazz.", "jazz"),  # one word proves nothing
        said("The user owns a boat.", "I own a yacht"),  # not what was said
        said("The project ships weekly.", "we ship weekly", about="project"),  # not asked
        "not an object",
    ]
    kept = parse_memories(raw, "Well, I'm vegetarian now; we ship weekly.", FORM_USER)
    assert [c.content for c in kept] == ["The user is vegetarian."]
    assert json.dumps([c.tier for c in kept]) == '["longterm"]'
