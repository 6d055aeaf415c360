"""A project's retention sweep (domain/retention.sweep) and the extraction
events' (domain/event_retention.purge), run on the fakes of tests/fakes.py:
what goes (episodes, sessions and summaries past the retention, with the
index jobs that take their points out), what stays (what is kept, a deleted
session's users' TASK memories), and when the sweep runs next; and a summary
written from exchanges past the retention hidden before any sweep.

The world is tests/e2e/service/test_project_retention.py's; that file keeps
the worker's wiring (a sweep run by its job, the points gone from the vector
index, the kept turn searchable by keyword) and what every read hides before
any sweep.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.models import MemoryKind, NewEpisode, Tier
from nexus_grpc.core.records import Summary
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import erasure, event_retention, retention
from nexus_grpc.domain.summaries import Summaries
from nexus_grpc.errors import NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork

DAY = 86_400
NOW = time.time()


def world(uow: FakeUnitOfWork) -> tuple[int, int, int, dict[str, int]]:
    """A project with a session of old and recent exchanges (3 days and a
    minute ago), and a session created five days ago whose one exchange is
    as old."""
    project = uow.projects.insert({"name": "p"}, "t1").id
    mixed = uow.sessions.insert("mixed", "", project, {}, "t1").id
    stale = uow.restore.insert_session("stale", "", project, {}, NOW - 5 * DAY, "t1")
    eps = {}
    for name, session, when in (
        ("old", mixed, NOW - 3 * DAY),
        ("new", mixed, NOW - 60),
        ("stale", stale, NOW - 5 * DAY),
    ):
        [eps[name]] = uow.episodes.insert_many(
            [NewEpisode(session, f"zebra {name} exchange", "noted", {}, None, when)]
        )
    return project, mixed, stale, eps


def keep(uow: FakeUnitOfWork, project_id: int, seconds: float | None) -> None:
    uow.projects.update(project_id, {"retention": seconds})


def queued(uow: FakeUnitOfWork, kind: str) -> list[int]:
    return uow.jobs.pending(kind)


def summary(uow: FakeUnitOfWork, session_id: int, project_id: int, content: str, at: float,
            first: int = 0, last: int = 0) -> int:  # fmt: skip
    return uow.restore.insert_summary(
        Summary(0, session_id, project_id, content, first, last, 1 if last else 0, at, at)
    )


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


def test_the_sweep_deletes_episodes_and_sessions_past_retention_with_their_points(uow):
    project, mixed, stale, eps = world(uow)
    keep(uow, project, 2 * DAY)
    retention.sweep(uow, project, NOW)
    assert sorted(uow.episodes.rows) == [eps["new"]]
    assert sorted(uow.sessions.rows) == [mixed]
    # Their points leave the vector index by the jobs queued before they went.
    assert queued(uow, jobs.INDEX_EPISODE) == sorted([eps["old"], eps["stale"]])
    # What was deleted leaves the files at the next scrub.
    assert erasure.scrub_due(uow) is not None
    assert stale not in uow.sessions.rows


def test_the_sweep_schedules_its_next_run_no_later_than_an_hour_away(uow):
    project, _, _, eps = world(uow)
    keep(uow, project, 2 * DAY)
    retention.sweep(uow, project, NOW)
    [due] = [j.run_after for j in uow.jobs.rows if j.kind == jobs.RETAIN_PROJECT]
    assert due <= NOW + 3600
    # When the oldest exchange left passes the retention, if that is sooner.
    keep(uow, project, 120)
    uow.jobs.rows = []
    retention.sweep(uow, project, NOW)
    [due] = [j.run_after for j in uow.jobs.rows if j.kind == jobs.RETAIN_PROJECT]
    assert due == pytest.approx(uow.episodes.rows[eps["new"]].occur_at + 120)


def test_a_sweep_that_stops_at_its_chunk_runs_again_at_once(uow, monkeypatch):
    monkeypatch.setattr(retention, "CHUNK", 1)
    project, _, _, eps = world(uow)
    keep(uow, project, 2 * DAY)
    retention.sweep(uow, project, NOW)
    assert [j.run_after for j in uow.jobs.rows if j.kind == jobs.RETAIN_PROJECT] == [NOW]
    assert eps["new"] in uow.episodes.rows


def test_a_project_without_a_retention_ends_the_chain_and_keeps_everything(uow):
    project, _, _, eps = world(uow)
    retention.sweep(uow, project, NOW)
    retention.sweep(uow, 999, NOW)  # gone
    assert sorted(uow.episodes.rows) == sorted(eps.values())
    assert [j for j in uow.jobs.rows if j.kind == jobs.RETAIN_PROJECT] == []


def test_a_deleted_sessions_users_task_memories_stay_and_the_projects_go(uow):
    """No user asked for the sweep's delete: their TASK-tier memories stay,
    as DeleteSession would not keep them; the project's go with the session."""
    project, _, stale, _ = world(uow)

    def memory(kind: MemoryKind, user: str) -> int:
        values: dict[str, Any] = {
            "kind": int(kind), "title": "t", "content": "c", "tier": int(Tier.TASK),
            "project_id": project, "agent_id": "", "user_id": user, "session_id": stale,
            "confidence": 0.9, "metadata": {},
        }  # fmt: skip
        return uow.memories.insert(values, None, "t1").id

    users = memory(MemoryKind.USER, "ann")
    projects = memory(MemoryKind.PROJECT, "")
    keep(uow, project, 2 * DAY)
    retention.sweep(uow, project, NOW)
    assert sorted(uow.memories.rows) == [users]
    assert queued(uow, jobs.INDEX_MEMORY) == [projects]


def test_the_sweep_deletes_summaries_past_retention(uow):
    """A stale session's summary goes with its session however recently it
    was written; a summary or overview last written before the cutoff goes;
    so does one that covers only exchanges past it. One that covers a kept
    exchange, written now, stays."""
    project, mixed, stale, eps = world(uow)
    long_ago = NOW - 3 * DAY
    made = {
        "stale": summary(uow, stale, 0, "stale summary", NOW, eps["stale"], eps["stale"]),
        "old": summary(uow, mixed, 0, "old summary", long_ago, eps["old"], eps["old"]),
        "overview": summary(uow, 0, project, "old overview", long_ago),
        "only old": summary(uow, mixed, 0, "only old", NOW, eps["old"], eps["old"]),
        "kept": summary(uow, mixed, 0, "kept", NOW, eps["new"]),
    }
    keep(uow, project, 2 * DAY)
    retention.sweep(uow, project, NOW)
    assert sorted(uow.summaries.rows) == [made["kept"]]
    # Each one's point leaves the index by a job queued before it went.
    gone = sorted(made[k] for k in ("stale", "old", "overview", "only old"))
    assert queued(uow, jobs.INDEX_SUMMARY) == gone


def test_extraction_events_past_their_retention_go_a_chunk_at_a_time(uow, monkeypatch):
    project, mixed, _, eps = world(uow)
    for episode in eps.values():
        uow.events.insert(episode, mixed, project, 1)
    ids = sorted(uow.events.rows)
    old, _, _ = (uow.events.rows[i][0] for i in ids)
    assert event_retention.oldest_kept(NOW, DAY) == NOW - DAY
    # Made now: a day's retention keeps them all until a day has passed.
    assert event_retention.purge(uow, NOW, DAY) == 0
    monkeypatch.setattr(event_retention, "CHUNK", 2)
    later = old.created_at + DAY + 1
    assert event_retention.purge(uow, later, DAY) == 2
    assert event_retention.purge(uow, later, DAY) == 1
    assert uow.events.rows == {}


async def test_a_summary_of_only_exchanges_past_retention_is_hidden_before_the_sweep(uow):
    """Written now, but from an exchange past the retention (an imported
    conversation summarized since): hidden, while one that also covers a kept
    exchange stays; no sweep has run."""
    project, mixed, _, eps = world(uow)
    only_old = summary(uow, mixed, 0, "only old", NOW, eps["old"], eps["old"])
    summary(uow, mixed, 0, "old and new", NOW, eps["old"], eps["new"])
    keep(uow, project, 2 * DAY)
    summaries = Summaries(FakeDatabase(uow), JobSignals(), None, "qwen2.5:3b")
    with pytest.raises(NotFound):
        await summaries.get(only_old)
    page = await summaries.list(mixed, 0, 10, "")
    assert [x.content for x in page.items] == ["old and new"]
    assert len(uow.summaries.rows) == 2  # the reads alone hide it
