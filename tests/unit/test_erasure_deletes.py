"""What DeleteSession, DeleteEpisode and DeleteProject take, and whose
memories they may not (domain/conversations.py's deletes, domain/erasure.py's
rules, domain/retention.py's sweep), on the fakes of tests/fakes.py.

A session goes with its episodes and what hangs on them, its summaries, its
graph and its TASK-tier memories; one episode with its events, evidence and
the graph only it held up, a summary that may quote it written again; a
project as a durable erasure, hidden at once. Alice's TASK memory on a
session of a project her tenant shares with Carol (whose key acts only for
Carol) refuses Carol's DeleteSession and DeleteProject, and survives a
retention or a session move Carol makes (the world of
tests/e2e/api/test_memory_ownership.py, which keeps the wiring of
DeleteMemory, DeleteSession and UpdateMemory's refusals). What a replay and
the files keep after each delete is tests/e2e/service/test_deletes_leave_nothing.py's.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from nexus_grpc.core import erasure as e
from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.graph import ASSERT
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.records import UPDATE, ChangedBy
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import erasure, facts, retention
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.errors import FailedPrecondition, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork, dumps
from tests.unit.callers import acting_as

ALICE = tenancy.Caller("team", frozenset({"alice"}))
CAROL = tenancy.Caller("team", frozenset({"carol"}))


def memory(uow: FakeUnitOfWork, project: int, session: int, kind: MemoryKind, user: str,
           tier: Tier = Tier.TASK, content: str = "c") -> int:  # fmt: skip
    values: dict[str, Any] = {
        "kind": int(kind), "title": "t", "content": content, "tier": int(tier),
        "project_id": project, "agent_id": "", "user_id": user, "session_id": session,
        "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    return uow.memories.insert(values, None, "team").id


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def c(uow: FakeUnitOfWork) -> Conversations:
    return Conversations(FakeDatabase(uow), JobSignals())


# -- whose memories a delete may take ------------------------------------------------------------


def ownership(uow: FakeUnitOfWork) -> dict[str, int]:
    """A project, a session in it with an episode, Alice's TASK memory on it
    (changed once, so it has history) and a PROJECT TASK memory beside it."""
    project = uow.projects.insert({"name": "atlas"}, "team").id
    session = uow.sessions.insert("s", "", project, {}, "team").id
    uow.episodes.insert(session, "plan the trip", "", {}, None)
    alice = memory(uow, project, session, MemoryKind.USER, "alice",
                   content="Alice wants a window seat")  # fmt: skip
    previous = uow.memories.rows[alice]
    uow.memories.update(alice, {"content": "Alice wants a window seat, front"})
    uow.memories.record(previous, UPDATE, ["content"], ChangedBy())
    shared = memory(uow, project, session, MemoryKind.PROJECT, "", content="tickets by friday")
    return {"project": project, "session": session, "alice": alice, "project_memory": shared}


def alice_still_has_it(uow: FakeUnitOfWork, ids: dict[str, int]) -> None:
    assert uow.memories.rows[ids["alice"]].content == "Alice wants a window seat, front"
    history = uow.memories.page(ids["alice"], None, 10)
    assert [r.previous.content for r in history] == ["Alice wants a window seat"]


def rows(uow: FakeUnitOfWork) -> str:
    return dumps([uow.sessions.rows, uow.episodes.rows, uow.memories.rows, uow.memories.history])


async def test_delete_session_is_refused_while_another_users_task_memory_is_on_it(uow, c):
    ids = ownership(uow)
    before = rows(uow)
    with acting_as(CAROL), pytest.raises(FailedPrecondition) as err:
        await c.delete_session(ids["session"])
    message = err.value.message
    assert f"session {ids['session']} still holds TASK-tier USER memories" in message
    assert "1 of users this key may not act for" in message
    assert "alice" not in message  # another user's name is not Carol's to learn
    assert rows(uow) == before
    alice_still_has_it(uow, ids)
    # Alice's key may act for every owner of the session's TASK memories: it
    # deletes the session, and they go with it.
    with acting_as(ALICE):
        assert await c.delete_session(ids["session"]) == 1
    assert uow.memories.rows == {}


async def test_delete_project_is_refused_while_another_users_memory_is_in_it(uow, c):
    ids = ownership(uow)
    with acting_as(CAROL), pytest.raises(FailedPrecondition) as err:
        await c.delete_project(ids["project"])
    assert "1 of users this key may not act for" in err.value.message
    assert uow.erasures.rows == {} and uow.projects.exists(ids["project"])
    alice_still_has_it(uow, ids)


async def test_a_retention_set_by_another_user_sweeps_the_session_but_not_her_memory(uow, c):
    """Carol may set the project's retention (the project is the tenant's);
    the sweep then deletes the conversation, the project's TASK memory with
    its session, and leaves Alice's memory to Alice."""
    ids = ownership(uow)
    with acting_as(CAROL):
        await c.update_project(ids["project"], {"retention": 1.0}, ["retention"])
    retention.sweep(uow, ids["project"], time.time() + 60)
    assert (uow.sessions.rows, uow.episodes.rows) == ({}, {})
    assert sorted(uow.memories.rows) == [ids["alice"]]  # the project's went with its session
    alice_still_has_it(uow, ids)
    # And DeleteProject, refused before the sweep, is refused after it.
    with acting_as(CAROL), pytest.raises(FailedPrecondition):
        await c.delete_project(ids["project"])


async def test_moving_a_session_into_a_project_with_retention_leaves_her_memory(uow, c):
    ids = ownership(uow)
    brief = uow.projects.insert({"name": "brief", "retention": 1.0}, "team").id
    with acting_as(CAROL):
        await c.update_session(ids["session"], {"project_id": brief}, ["project_id"])
    # Moved into a project with a retention: its sweep is due now.
    assert uow.jobs.pending(jobs.RETAIN_PROJECT) == [brief]
    retention.sweep(uow, brief, time.time() + 60)
    assert uow.sessions.rows == {}
    alice_still_has_it(uow, ids)


# -- what a delete takes ------------------------------------------------------------------------


def conversation(uow: FakeUnitOfWork) -> dict[str, Any]:
    """Ann's session in a project: two episodes, the first extracted (a
    person only it names, a place the second names too, where she lives) and
    formed (a USER memory), a session summary written since, a TASK and a
    LONGTERM memory on the session; and Bo's session beside it."""
    project = uow.projects.insert({"name": "p"}, "team").id
    session = uow.sessions.insert("ann", "", project, {}, "team", user_id="ann").id
    said = uow.episodes.insert(session, "I live in Porto", "ok", {}, "r-1", acts_for="ann").id
    again = uow.episodes.insert(session, "Porto again", "ok", {}, None, acts_for="ann").id
    graph = (project, 0)
    ann = uow.graph.insert_entity(graph, "Ann", "person", "notes", source="extraction",
                                  episode_id=said)  # fmt: skip
    porto = uow.graph.insert_entity(graph, "Porto", "place", None, source="extraction",
                                    episode_id=said)  # fmt: skip
    uow.graph.mention(porto, None, episode_id=again)
    uow.graph.add_evidence(ann, porto, "lives_in", ASSERT, 100.0, episode_id=said)
    facts.rederive(uow, [(ann, "lives_in")], facts.single_valued(uow, graph))
    formed = uow.memories.insert(
        {"kind": int(MemoryKind.USER), "title": "home", "content": "lives in Porto",
         "tier": int(Tier.LONGTERM), "project_id": project, "agent_id": "", "user_id": "ann",
         "session_id": 0, "confidence": 0.9, "metadata": {}, "source": "formation",
         "source_episode_id": said}, None, "team",
    ).id  # fmt: skip
    uow.events.insert(said, session, project, 1)
    uow.memories.put_candidates(said, [{"content": "lives in Porto"}])
    uow.jobs.enqueue(jobs.FORM_MEMORIES, [said])
    summary = uow.summaries.insert(session_id=session, project_id=0, content="Ann, Porto").id
    task = memory(uow, project, session, MemoryKind.USER, "ann")
    longterm = memory(uow, project, session, MemoryKind.USER, "ann", Tier.LONGTERM)
    bo = uow.sessions.insert("bo", "", project, {}, "team", user_id="bo").id
    bos = uow.episodes.insert(bo, "hello", "", {}, None, acts_for="bo").id
    return {
        "project": project, "session": session, "episodes": [said, again], "ann": ann,
        "porto": porto, "formed": formed, "summary": summary, "task": task,
        "longterm": longterm, "bo": bo, "bos": bos,
    }  # fmt: skip


async def test_delete_session_takes_its_episodes_summaries_graph_and_task_memories(uow, c):
    w = conversation(uow)
    with acting_as(tenancy.Caller("team")):
        assert await c.delete_session(w["session"]) == 2
    assert sorted(uow.sessions.rows) == [w["bo"]]
    assert sorted(uow.episodes.rows) == [w["bos"]]
    assert uow.summaries.rows == {}
    # What only its episodes held up goes: both entities, the fact, the evidence.
    assert (uow.graph.entities, uow.graph.relationships, uow.graph.evidence) == ({}, {}, {})
    assert (uow.events.rows, uow.memories.candidates) == ({}, {})
    # Its TASK memory goes; what its user formed or keeps longer stays hers.
    assert sorted(uow.memories.rows) == sorted([w["formed"], w["longterm"]])
    assert uow.jobs.queued_targets(jobs.FORM_MEMORIES) == set()
    # Every point goes by its index job, and the bytes at the next scrub.
    assert uow.jobs.pending(jobs.INDEX_EPISODE) == w["episodes"]
    assert uow.jobs.pending(jobs.INDEX_SUMMARY) == [w["summary"]]
    assert uow.jobs.pending(jobs.INDEX_MEMORY) == [w["task"]]
    assert uow.jobs.pending(jobs.INDEX_ENTITY) == sorted([w["ann"], w["porto"]])
    assert erasure.scrub_due(uow) is not None


async def test_delete_episode_takes_what_it_said_and_the_summary_quoting_it(uow, c):
    w = conversation(uow)
    said, again = w["episodes"]
    with acting_as(tenancy.Caller("team")):
        await c.delete_episode(said)
    assert sorted(uow.episodes.rows) == [again, w["bos"]]
    # Her person (only this episode named it), its fact and evidence go;
    # Porto, which the other episode names, stays under its name.
    assert sorted(uow.graph.entities) == [w["porto"]]
    [alias] = uow.graph.list_aliases(w["porto"], None, 10)
    assert (alias.name, alias.episode_id) == ("Porto", again)
    assert (uow.graph.relationships, uow.graph.evidence) == ({}, {})
    assert (uow.events.rows, uow.memories.candidates) == ({}, {})
    # The summary that may quote it goes, and is queued to be written again.
    assert uow.summaries.rows == {}
    assert uow.jobs.pending(jobs.SUMMARIZE_SESSION) == [w["session"]]
    # What she formed or stored stays hers: a delete of an episode is not a forgetting.
    assert {w["formed"], w["task"], w["longterm"]} <= set(uow.memories.rows)
    assert uow.memories.rows[w["formed"]].source_episode_id is None
    # A retry of its request id writes it again: only an erasure buries one.
    assert uow.erasures.buried_requests == {}


async def test_delete_project_hides_it_at_once_and_its_erasure_takes_everything(uow, c):
    w = conversation(uow)
    other = uow.projects.insert({"name": "q"}, "team").id
    kept = uow.sessions.insert("elsewhere", "", other, {}, "team").id
    with acting_as(tenancy.Caller("team")):
        started = await c.delete_project(w["project"])
        # From the delete's commit on, no read sees the project or its sessions.
        with pytest.raises(NotFound):
            await c.get_project(w["project"])
    assert started.planned.sessions == 2 and started.planned.episodes == 3
    with pytest.raises(NotFound):
        uow.sessions.get(w["session"])
    # Its name is the tenant's to take again at once.
    assert uow.projects.insert({"name": "p"}, "team").name == "p"
    for _ in range(100):
        after = erasure.step(uow, started.id, time.time() + 1)
        if after is not None and after.phase == e.DISK:
            break
    assert after is not None and after.phase == e.DISK
    assert sorted(uow.sessions.rows) == [kept]
    assert (uow.episodes.rows, uow.memories.rows, uow.graph.entities) == ({}, {}, {})
    assert w["project"] not in uow.projects.rows
    c_ = after.counts
    assert (c_.sessions, c_.episodes, c_.memories, c_.entities) == (2, 3, 3, 2)


async def test_delete_project_refused_to_a_key_for_other_users_then_taken_by_one_for_all(uow, c):
    """The cascade must not bypass USER-memory ownership (DeleteMemory's rule);
    a key that may act for every owner deletes the project with them, and the
    user's memory outside it stays (test_tenants.py's case, on the fakes)."""
    project = uow.projects.insert({"name": "p"}, "team").id
    session = uow.sessions.insert("s", "", project, {}, "team", user_id="alice").id
    uow.episodes.insert(session, "zebra", "", {}, None, acts_for="alice")
    memory(uow, project, 0, MemoryKind.USER, "alice", Tier.LONGTERM)
    memory(uow, project, 0, MemoryKind.PROJECT, "", Tier.LONGTERM)
    outside = memory(uow, 0, 0, MemoryKind.USER, "alice", Tier.LONGTERM)
    before = rows(uow)
    with (
        acting_as(tenancy.Caller("team", frozenset({"bob"}))),
        pytest.raises(FailedPrecondition) as err,
    ):
        await c.delete_project(project)
    assert "1 of users this key may not act for" in err.value.message
    assert "alice" not in err.value.message  # names only users the key may act for
    assert rows(uow) == before and uow.erasures.rows == {}
    with acting_as(ALICE):
        started = await c.delete_project(project)
    for _ in range(100):
        after = erasure.step(uow, started.id, time.time() + 1)
        if after is not None and after.phase == e.DISK:
            break
    assert [(m.project_id, m.user_id) for m in uow.memories.rows.values()] == [(0, "alice")]
    assert list(uow.memories.rows) == [outside]
