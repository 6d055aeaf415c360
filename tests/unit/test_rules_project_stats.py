"""GetProjectStats' own rules (domain/project_stats.py), given the store's
counts as plain values: memories summed by kind, user and archive, USER
memories counted only for the users the key may act for, users most first
and at most MAX_USERS, the retention's cutoff handed to the counts, a
read_mask or no top_entities leaving a count unasked, another tenant's
project counting nothing. The refusals of bad input are
tests/unit/test_api_stats_request.py's.

The counts themselves are SQL over each store's tables (not faked: see
docs/testing.md); that they follow the reads (retention, expiry, another
tenant's project NOT_FOUND) is the whole-server tier's:
tests/e2e/api/test_project_stats.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from nexus_grpc.core.models import MemoryKind
from nexus_grpc.domain import project_stats
from nexus_grpc.domain.project_stats import ProjectStatistics
from nexus_grpc.errors import NotFound
from tests.fakes import FakeDatabase, FakeProjects, FakeUnitOfWork
from tests.unit.callers import acting_as

USER, PROJECT = int(MemoryKind.USER), int(MemoryKind.PROJECT)


class CountedProjects(FakeProjects):
    """The fake's projects, with the store's counts given as plain values and
    each count's arguments noted (which counts a call asked for, and with what)."""

    def __init__(self, memories: list[tuple[int, str, bool, int]]) -> None:
        super().__init__()
        self.memory_rows = memories
        self.asked: dict[str, tuple[Any, ...]] = {}

    def count_sessions(self, project_id: int, cutoff: float | None) -> int:
        self.asked["sessions"] = (project_id, cutoff)
        return 3

    def count_episodes(self, project_id: int, cutoff: float | None) -> tuple[int, int, int]:
        self.asked["episodes"] = (project_id, cutoff)
        return (10, 2, 1)

    def count_memories(self, project_id: int, at: float) -> list[tuple[int, str, bool, int]]:
        self.asked["memories"] = (project_id,)
        return self.memory_rows

    def count_graph(self, project_id: int) -> tuple[int, int]:
        self.asked["graph"] = (project_id,)
        return (5, 4)

    def most_connected(self, project_id: int, limit: int) -> list[int]:
        self.asked["top"] = (project_id, limit)
        return [9, 8][:limit]


MEMORIES = [
    (PROJECT, "", False, 2),
    (PROJECT, "", True, 1),
    (USER, "bob", False, 2),
    (USER, "alice", False, 1),
    (USER, "alice", True, 1),
    (USER, "carol", False, 3),
]


def _world(memories=MEMORIES, retention: float | None = None):
    projects = CountedProjects(memories)
    uow = FakeUnitOfWork(projects=projects)
    pid = projects.insert({"name": "p", "retention": retention}, "t1").id
    return ProjectStatistics(FakeDatabase(uow)), projects, pid


async def test_memories_are_summed_by_kind_user_and_archive():
    stats, _, pid = _world()
    got = await stats.get(pid, top_entities=1)
    assert (got.project_memories, got.user_memories, got.archived_memories) == (3, 7, 2)
    # Most memories first, then by name.
    assert got.users == (("carol", 3), ("alice", 2), ("bob", 2))
    assert got.user_count == 3
    assert (got.sessions, got.episodes, got.jobs_pending, got.jobs_failed) == (3, 10, 2, 1)
    assert (got.entities, got.relationships, got.top_entity_ids) == (5, 4, (9,))


async def test_a_user_key_counts_only_its_own_users_memories():
    stats, _, pid = _world()
    with acting_as("t1", frozenset({"alice"})):
        got = await stats.get(pid)
    # bob's and carol's memories are not even counted as archived.
    assert (got.user_memories, got.archived_memories, got.project_memories) == (2, 2, 3)
    assert (got.users, got.user_count) == ((("alice", 2),), 1)


async def test_at_most_max_users_are_named_but_all_are_counted(monkeypatch):
    monkeypatch.setattr(project_stats, "MAX_USERS", 2)
    stats, _, pid = _world()
    got = await stats.get(pid)
    assert got.users == (("carol", 3), ("alice", 2))
    assert got.user_count == 3


async def test_the_retention_cuts_off_the_sessions_and_episodes_counted():
    stats, projects, pid = _world(retention=86_400)
    before = time.time()
    await stats.get(pid)
    (_, cutoff) = projects.asked["episodes"]
    assert before - 86_400 <= cutoff <= time.time() - 86_400
    assert projects.asked["sessions"] == (pid, cutoff)
    stats, projects, pid = _world()
    await stats.get(pid)
    assert projects.asked["episodes"] == (pid, None)  # no retention: every episode


async def test_a_read_mask_counts_only_what_it_names():
    stats, projects, pid = _world()
    got = await stats.get(pid, top_entities=2, read_mask=["users", "user_count"])
    assert set(projects.asked) == {"memories"}
    assert (got.users, got.user_count) == ((("carol", 3), ("alice", 2), ("bob", 2)), 3)
    assert (got.sessions, got.episodes, got.entities, got.top_entity_ids) == (0, 0, 0, ())
    stats, projects, pid = _world()
    hubs = await stats.get(pid, top_entities=2, read_mask=["top_entity_ids"])
    assert set(projects.asked) == {"top"} and projects.asked["top"] == (pid, 2)
    assert (hubs.top_entity_ids, hubs.users) == ((9, 8), ())


async def test_no_top_entities_asked_reads_none():
    stats, projects, pid = _world()
    got = await stats.get(pid)
    assert "top" not in projects.asked and got.top_entity_ids == ()
    assert {"sessions", "episodes", "memories", "graph"} <= set(projects.asked)


async def test_another_tenants_project_is_not_found():
    stats, projects, pid = _world()
    with acting_as("t2"), pytest.raises(NotFound, match=f"project {pid} does not exist"):
        await stats.get(pid)
    assert projects.asked == {}
