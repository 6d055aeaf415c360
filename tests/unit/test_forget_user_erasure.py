"""A user's erasure run through every step on the fakes of tests/fakes.py
(domain/erasure.py's start, step and finish, as the eraser worker calls
them): two users of one project, each with words on every path the
whole-server test follows (their episodes, an imported one, a memory they
stored, the memories formed from what they said, the graph extraction made
of it, a session summary and a project overview); one is forgotten. What
goes, what the receipt counts, what the other user keeps, and what a retry
of an erased write or a queued formation job brings back (nothing).

The same world is built through the server in tests/e2e/service/
test_forget_user.py, which keeps ForgetUser's wiring and every byte scan
(no word of the forgotten user in any table, nor on SQLite in any file).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from nexus_grpc.api import erasure_convert
from nexus_grpc.core import erasure as e
from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.erasure import Counts, Erasure, Target
from nexus_grpc.core.graph import ASSERT
from nexus_grpc.core.models import MemoryKind, NewEpisode, Tier
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import erasure, facts
from nexus_grpc.domain.erasures import Erasures
from nexus_grpc.domain.memories import Memories
from nexus_grpc.errors import FailedPrecondition
from tests.fakes import FakeDatabase, FakeUnitOfWork


@contextmanager
def tenant(name: str) -> Iterator[None]:
    """The calls made as a key of the tenant, for every user."""
    token = tenancy.bind(tenancy.Caller(name))
    try:
        yield
    finally:
        tenancy.reset(token)


def _memory(uow: FakeUnitOfWork, project: int, kind: MemoryKind, user: str, content: str,
            request_id: str | None = None, episode: int | None = None) -> int:  # fmt: skip
    values: dict[str, Any] = {
        "kind": int(kind), "title": "t", "content": content, "tier": int(Tier.LONGTERM),
        "project_id": project, "agent_id": "", "user_id": user, "session_id": 0,
        "confidence": 0.9, "metadata": {},
        "source": "client" if episode is None else "formation", "source_episode_id": episode,
    }  # fmt: skip
    return uow.memories.insert(values, request_id, "t1").id


def _said(uow: FakeUnitOfWork, project: int, user: str, lisbon: int | None) -> dict[str, Any]:
    """What one user's episode left: its extraction (a person, Lisbon, where
    the person lives), its formation (a USER and a PROJECT memory, an event,
    candidates), an imported episode and a memory the user stored."""
    session = uow.sessions.insert(f"s-{user}", "", project, {}, "t1", user_id=user).id
    [episode, imported] = uow.episodes.insert_many(
        [NewEpisode(session, f"I say {user}word today", f"Noted: {user}reply", {}, f"ep-{user}",
                    acts_for=user),
         NewEpisode(session, f"imported {user}import", "ok", {}, f"imp-{user}",
                    acts_for=user)]
    )  # fmt: skip
    graph = (project, 0)
    person = uow.graph.insert_entity(graph, f"Person {user}", "person", f"notes {user}",
                                     source="extraction", episode_id=episode)  # fmt: skip
    if lisbon is None:
        lisbon = uow.graph.insert_entity(graph, "Lisbon", "place", None, source="extraction",
                                         episode_id=episode)  # fmt: skip
    else:
        uow.graph.mention(lisbon, None, episode_id=episode)
    uow.graph.add_evidence(person, lisbon, "lives_in", ASSERT, 100.0, episode_id=episode)
    facts.rederive(uow, [(person, "lives_in")], facts.single_valued(uow, graph))
    formed = [
        _memory(uow, project, MemoryKind.USER, user, f"{user} formed", episode=episode),
        _memory(uow, project, MemoryKind.PROJECT, "", f"{user} project", episode=episode),
    ]
    uow.memories.put_candidates(episode, [{"content": f"{user} formed"}])
    operations = [{"memory_id": m, "content": "words", "reason": "new"} for m in formed]
    uow.events.insert(
        episode, session, project, 1, payload={"formation": {"operations": operations}}
    )
    stored = _memory(uow, project, MemoryKind.USER, user, f"{user} stored", f"mem-{user}")
    summary = uow.summaries.insert(session_id=session, project_id=0, content=f"{user} summary").id
    return {
        "session": session, "episodes": [episode, imported], "person": person,
        "lisbon": lisbon, "memories": [*formed, stored], "summary": summary,
    }  # fmt: skip


@pytest.fixture
def world() -> tuple[FakeUnitOfWork, int, dict[str, dict[str, Any]]]:
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "shared"}, "t1").id
    alice = _said(uow, project, "alice", None)
    bob = _said(uow, project, "bob", alice["lisbon"])
    uow.summaries.insert(session_id=0, project_id=project, content="alice and bob")
    return uow, project, {"alice": alice, "bob": bob}


def forget(uow: FakeUnitOfWork, user: str, project_id: int = 0) -> Erasure:
    """ForgetUser's erasure, stepped through as the eraser worker does, then finished."""
    started = erasure.start(uow, Target("t1", e.USER, user, project_id), "key")
    for _ in range(100):
        after = erasure.step(uow, started.id, time.time() + 1)
        if after is not None and after.phase == e.DISK:
            break
    assert erasure.disk_ready(uow, uow.erasures.get(started.id)) is False  # its index jobs wait
    uow.jobs.rows = [j for j in uow.jobs.rows if not j.kind.startswith("index:")]
    done = erasure.finish(uow, started.id)
    assert done is not None
    return done


def test_the_plan_and_the_receipt_count_what_the_user_held(world):
    uow, _, _ = world
    started = erasure.start(uow, Target("t1", e.USER, "alice"), "key")
    assert (started.planned.sessions, started.planned.episodes) == (1, 2)
    uow.erasures.rows.clear()
    uow.jobs.rows = []
    c = forget(uow, "alice").counts
    assert (c.sessions, c.episodes) == (1, 2)
    # Her direct memory and the USER and PROJECT memories her episode formed.
    assert c.memories == 3
    assert (c.entities, c.facts, c.evidence) == (1, 1, 1)
    # Her session's summary and the overview.
    assert c.summaries_removed == 2
    assert (c.extraction_events, c.formation_candidates) == (1, 1)
    # Her person's name goes; Lisbon, which bob's episode names too, keeps its.
    assert (c.aliases, c.mentions) == (1, 2)


def test_every_row_of_hers_goes_and_bobs_stay(world):
    uow, _, made = world
    alice, bob = made["alice"], made["bob"]
    done = forget(uow, "alice")
    assert (done.state, done.phase, done.user_id) == (e.DONE, e.FINISHED, "")
    assert sorted(uow.sessions.rows) == [bob["session"]]
    assert sorted(uow.episodes.rows) == bob["episodes"]
    assert sorted(uow.memories.rows) == sorted(bob["memories"])
    # The overview drew on her episodes: it went; bob's session summary stays.
    assert sorted(uow.summaries.rows) == [bob["summary"]]
    assert sorted(uow.graph.entities) == sorted([bob["lisbon"], bob["person"]])
    assert not any(alice["session"] == ev.session_id for ev, _ in uow.events.rows.values())
    # No row names her any more.
    held = [s.user_id for s in uow.sessions.rows.values()]
    held += [x.acts_for for x in uow.episodes.rows.values()]
    held += [m.user_id for m in uow.memories.rows.values()]
    assert "alice" not in held
    assert uow.erasures.user_holds("t1", "alice", 0) == Counts()


def test_the_shared_entity_stays_without_her_evidence_and_bobs_fact_is_whole(world):
    uow, _, made = world
    lisbon, bob = made["bob"]["lisbon"], made["bob"]
    forget(uow, "alice")
    # Its name, which only her episode gave, is now given by bob's, who names it too.
    [alias] = uow.graph.list_aliases(lisbon, None, 10)
    assert (alias.name, alias.episode_id) == ("Lisbon", bob["episodes"][0])
    assert uow.graph.get_entity(lisbon).mention_count == 1
    assert [(r.from_id, r.to_id) for r in uow.graph.list_relationships(lisbon, True)] == [
        (bob["person"], lisbon)
    ]
    assert [v.episode_id for v in uow.graph.evidence_of(bob["person"], "lives_in")] == [
        bob["episodes"][0]
    ]
    assert uow.graph.get_entity(bob["person"]).notes == "notes bob"


def test_a_replayed_request_id_is_refused_and_a_new_one_writes_again(world):
    uow, _, made = world
    session = made["alice"]["session"]
    forget(uow, "alice")
    for digest, request_id in (
        (erasure.memory_request(uow, "t1", "alice", "mem-alice", create=False), "mem-alice"),
        (erasure.episode_request(uow, session, "ep-alice", create=False), "ep-alice"),
        (erasure.episode_request(uow, session, "imp-alice", create=False), "imp-alice"),
    ):
        with pytest.raises(FailedPrecondition) as refused:
            erasure.refuse_buried(uow, digest, request_id)
        assert "erasure" in refused.value.message and "request_id" in refused.value.message
    # A user who comes back is not refused: a new request id, or bob's own.
    for digest, request_id in (
        (erasure.memory_request(uow, "t1", "alice", "mem-alice-2", create=False), "mem-alice-2"),
        (erasure.memory_request(uow, "t1", "bob", "mem-bob", create=False), "mem-bob"),
    ):
        erasure.refuse_buried(uow, digest, request_id)


def test_a_queued_formation_job_is_cancelled_and_brings_nothing_back():
    """Her episode's formation waits (on a model that fails); she is
    forgotten meanwhile: the job goes with the episode, and nothing of hers
    is left for it to form."""
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, "t1").id
    session = uow.sessions.insert("s", "", project, {}, "t1", user_id="alice").id
    _memory(uow, project, MemoryKind.USER, "alice", "The user lives in Lisbon.")
    episode = uow.episodes.insert(session, "I moved to Porto", "ok", {}, None, acts_for="alice").id
    uow.jobs.enqueue(jobs.FORM_MEMORIES, [episode])
    uow.jobs.retry_later(uow.jobs.claim(jobs.FORM_MEMORIES, 1)[0].id, "model away", 60.0)
    receipt = forget(uow, "alice")
    assert receipt.counts.jobs_cancelled >= 1
    assert uow.memories.rows == {}
    assert uow.jobs.queued_targets(jobs.FORM_MEMORIES) == set()
    assert uow.jobs.queued_targets(jobs.EXTRACT_EPISODE) == set()


def test_an_erasure_limited_to_a_project_leaves_her_elsewhere(world):
    uow, project, made = world
    other = uow.projects.insert({"name": "other"}, "t1").id
    there = uow.sessions.insert("there", "", other, {}, "t1", user_id="alice").id
    kept = _memory(uow, other, MemoryKind.USER, "alice", "elsewhere")
    done = forget(uow, "alice", project)
    assert (done.counts.sessions, done.counts.episodes) == (1, 2)
    assert there in uow.sessions.rows and kept in uow.memories.rows
    assert made["alice"]["session"] not in uow.sessions.rows
    assert uow.erasures.user_holds("t1", "alice", 0) == Counts(sessions=1, memories=1)


async def test_a_memory_written_again_with_an_erased_request_id_is_refused(world):
    """CreateMemory retried with the request id of a memory the erasure took
    brings nothing back; with a new request id the user who came back writes."""
    uow, project, _ = world
    forget(uow, "alice")
    memories = Memories(FakeDatabase(uow), JobSignals(), None, None)  # type: ignore[arg-type]
    values = {"kind": int(MemoryKind.USER), "user_id": "alice", "project_id": project,
              "title": "direct", "content": "stored again"}  # fmt: skip
    with tenant("t1"):
        with pytest.raises(FailedPrecondition) as err:
            await memories.create(values, "mem-alice")
        assert "erasure" in err.value.message and "request_id" in err.value.message
        again = await memories.create({**values, "title": "new"}, "mem-alice-2")
    assert uow.memories.rows[again.id].user_id == "alice"


async def test_a_second_request_while_one_runs_joins_it(world):
    uow, _, _ = world
    erasures = Erasures(FakeDatabase(uow), JobSignals(), "t1")
    first = await erasures.forget_user("alice", 0, "key")
    second = await erasures.forget_user("alice", 0, "key")
    assert (second.id, second.joined, first.joined) == (first.id, True, False)
    assert erasure_convert.erasure(second).joined
    assert uow.jobs.pending(jobs.ERASE) == [first.id]
