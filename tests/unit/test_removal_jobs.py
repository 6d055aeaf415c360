"""The index jobs a removal queues (domain/erasure.py, "a removal's follow-up
work"), decided by the domain on the fakes of tests/fakes.py: a deleted
session's episodes, summaries, own graph and TASK-tier memories each have
the job that takes their point out of the vector index, queued before the
rows go (so in their tenant), and nothing else is touched."""

from __future__ import annotations

import time

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.domain import erasure
from tests.fakes import FakeUnitOfWork

INDEX_KINDS = (jobs.INDEX_EPISODE, jobs.INDEX_SUMMARY, jobs.INDEX_ENTITY, jobs.INDEX_MEMORY)


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


def memory(uow, session_id: int, tier: Tier, kind: MemoryKind, user: str = "ann") -> int:
    values = {
        "kind": int(kind), "title": "t", "content": "c", "tier": int(tier), "project_id": 0,
        "agent_id": "", "user_id": user if kind == MemoryKind.USER else "",
        "session_id": session_id, "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    return uow.memories.insert(values, None, "atlas").id


def world(uow) -> dict[str, object]:
    """A session outside any project holding a row of every kind with a
    point, and a neighbour (and a project) whose rows must stay."""
    project = uow.projects.insert({"name": "p"}, "atlas").id
    session = uow.sessions.insert("s", "", 0, {}, "atlas", user_id="ann").id
    other = uow.sessions.insert("o", "", 0, {}, "atlas").id
    return {
        "session": session,
        "episodes": [uow.episodes.insert(session, t, "", {}, None).id for t in ("a", "b")],
        "summaries": [uow.summaries.insert(session_id=session, project_id=0, content="s").id],
        "entities": [
            uow.graph.insert_entity((0, session), name, "person", None, source="manual")
            for name in ("Ann", "Bob")
        ],
        "task_user": memory(uow, session, Tier.TASK, MemoryKind.USER),
        "task_project": memory(uow, session, Tier.TASK, MemoryKind.PROJECT),
        # What stays: a longer-lived memory of the session, and the rows of
        # another session and of a project's graph.
        "kept": [
            memory(uow, session, Tier.LONGTERM, MemoryKind.USER),
            memory(uow, other, Tier.TASK, MemoryKind.USER),
        ],
        "kept_episode": uow.episodes.insert(other, "c", "", {}, None).id,
        "kept_summary": uow.summaries.insert(session_id=other, project_id=0, content="o").id,
        "kept_entity": uow.graph.insert_entity((project, 0), "Cy", "person", None, source="manual"),
    }


def queued(uow) -> dict[str, list[tuple[int, str]]]:
    """The pending index jobs, by kind: (target, tenant)."""
    return {
        kind: sorted((j.target_id, j.tenant) for j in uow.jobs.rows if j.kind == kind)
        for kind in INDEX_KINDS
    }


def test_deleting_a_session_queues_the_index_jobs_of_everything_it_takes(uow):
    w = world(uow)
    episodes = erasure.remove_session(uow, w["session"], "atlas")
    assert episodes == 2
    # The tenant is read from the row, so the job was queued while it was there
    # (entities' tenant is not kept by the fakes: '').
    assert queued(uow) == {
        jobs.INDEX_EPISODE: [(i, "atlas") for i in w["episodes"]],
        jobs.INDEX_SUMMARY: [(i, "atlas") for i in w["summaries"]],
        jobs.INDEX_ENTITY: [(i, "") for i in w["entities"]],
        jobs.INDEX_MEMORY: sorted([(w["task_user"], "atlas"), (w["task_project"], "atlas")]),
    }
    assert all(j.priority == jobs.LIVE for j in uow.jobs.rows)
    # And the rows went, the others stayed.
    assert not set(w["episodes"]) & set(uow.episodes.rows)
    assert not set(w["summaries"]) & set(uow.summaries.rows)
    assert not set(w["entities"]) & set(uow.graph.entities)
    assert set(uow.memories.rows) == set(w["kept"])
    assert w["kept_episode"] in uow.episodes.rows
    assert w["kept_summary"] in uow.summaries.rows
    assert w["kept_entity"] in uow.graph.entities


def test_a_delete_no_user_asked_for_leaves_their_task_memories_and_their_points(uow):
    """The retention sweep's delete: a user's TASK memory stays, so its point
    must too; the project's goes."""
    w = world(uow)
    erasure.remove_session(uow, w["session"], user_task_memories=False)
    assert queued(uow)[jobs.INDEX_MEMORY] == [(w["task_project"], "atlas")]
    assert w["task_user"] in uow.memories.rows


def test_a_pending_import_job_for_a_deleted_row_becomes_live_and_due_now(uow):
    """Deleted words leave the vector index promptly: the point's pending
    index job (an import's, bulk and due later) is made live and due now."""
    w = world(uow)
    later = time.time() + 3600
    first = w["episodes"][0]
    uow.jobs.enqueue(jobs.INDEX_EPISODE, [first], run_after=later, priority=jobs.BULK)
    before = time.time()
    erasure.remove_session(uow, w["session"])
    job = uow.jobs.pending_job(jobs.INDEX_EPISODE, first)
    assert job is not None and job.priority == jobs.LIVE and job.run_after <= before + 1
    assert len([j for j in uow.jobs.rows if j.kind == jobs.INDEX_EPISODE]) == 2


def test_removed_summaries_have_their_points_dropped(uow):
    """The retention sweep's and an erasure's summaries (and overviews)."""
    w = world(uow)
    overview = uow.summaries.insert(session_id=0, project_id=1, content="o").id
    gone = [*w["summaries"], overview]
    assert erasure.remove_summaries(uow, gone) == 2
    assert queued(uow)[jobs.INDEX_SUMMARY] == [(i, "atlas") for i in gone]
    assert not set(gone) & set(uow.summaries.rows)
