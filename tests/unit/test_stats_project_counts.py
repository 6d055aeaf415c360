"""GetProjectStats' counts (domain/project_stats.py), on the fakes of
tests/fakes.py: what a key for every user counts, what a user key may learn
of other users' memories (nothing), another tenant's project answered as a
missing one, a read mask counting only what it names, and the retention.
The world is tests/e2e/api/test_project_stats.py's, written to the fakes;
that file keeps the wiring (a whole response, a read mask and a bad field
over the wire), and tests/unit/test_api_stats_request.py each field's check.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from nexus_grpc.core import tenancy
from nexus_grpc.core.graph import Interval
from nexus_grpc.core.models import JobState, MemoryKind, NewEpisode, Tier
from nexus_grpc.domain.project_stats import ProjectStatistics, ProjectStats
from nexus_grpc.errors import NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.callers import acting_as

DAY = 86_400
TEAM = tenancy.Caller("acme")
ALICE = tenancy.Caller("acme", frozenset({"alice"}))
RIVAL = tenancy.Caller("other")


def _memory(uow: FakeUnitOfWork, kind: MemoryKind, project_id: int, user_id: str = "",
            tier: Tier = Tier.LONGTERM) -> None:  # fmt: skip
    values: dict[str, Any] = {
        "kind": int(kind), "title": "t", "content": "c", "tier": int(tier),
        "project_id": project_id, "agent_id": "", "user_id": user_id, "session_id": 0,
        "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    uow.memories.insert(values, None, "acme")


@pytest.fixture
def world() -> tuple[FakeUnitOfWork, int, list[int]]:
    """Project p of tenant acme: alice's session (two episodes) and bob's
    (one); two PROJECT memories (one archived), alice's two USER memories
    and bob's two (one archived), and one of alice's outside any project;
    four entities, a knowing b, c and d now, and b having known c until
    yesterday. Every episode is indexed; extraction waits on all three,
    formation on alice's two; bob's formation was given up."""
    uow = FakeUnitOfWork()
    pid = uow.projects.insert({"name": "p"}, "acme").id
    alice = uow.sessions.insert("s-alice", "", pid, {}, "acme", user_id="alice").id
    bob = uow.sessions.insert("s-bob", "", pid, {}, "acme", user_id="bob").id
    episodes = uow.episodes.insert_many(
        [NewEpisode(s, f"m{i}", "ok", {}, None) for i, s in enumerate((alice, alice, bob))]
    )
    uow.episodes.set_embed_state(episodes, JobState.DONE)
    for episode, state in zip(episodes, (JobState.PENDING, JobState.PENDING, JobState.FAILED),
                              strict=True):  # fmt: skip
        uow.episodes.set_memory_state(episode, state, "gave up" if state == JobState.FAILED else "")
    _memory(uow, MemoryKind.PROJECT, pid)
    _memory(uow, MemoryKind.PROJECT, pid, tier=Tier.ARCHIVE)
    for user in ("alice", "alice", "bob"):
        _memory(uow, MemoryKind.USER, pid, user)
    _memory(uow, MemoryKind.USER, pid, "bob", Tier.ARCHIVE)
    _memory(uow, MemoryKind.USER, 0, "alice")
    ids = [uow.graph.insert_entity((pid, 0), n, "person", None, source="manual")
           for n in ("Ana", "Bruno", "Carla", "Dora")]  # fmt: skip
    a, b, c, d = ids
    now = time.time()
    uow.graph.write_intervals(a, "knows", [Interval(to, now) for to in (b, c, d)])
    uow.graph.write_intervals(b, "knows", [Interval(c, now - 2 * DAY, now - DAY)])
    return uow, pid, ids


async def stats(uow: FakeUnitOfWork, caller: tenancy.Caller, pid: int, **kw) -> ProjectStats:
    with acting_as(caller):
        return await ProjectStatistics(FakeDatabase(uow)).get(pid, **kw)


async def test_a_key_for_every_user_counts_everything_the_reads_return(world):
    uow, pid, (a, b, _, _) = world
    got = await stats(uow, TEAM, pid, top_entities=2)
    assert (got.project_id, got.sessions, got.episodes) == (pid, 2, 3)
    assert (got.project_memories, got.user_memories, got.archived_memories) == (2, 4, 2)
    assert got.users == (("alice", 2), ("bob", 2))
    assert got.user_count == 2
    # Four entities; three facts hold now (b->c ended yesterday).
    assert (got.entities, got.relationships) == (4, 3)
    # a has three relationships; b and c two each (the ended one counts): b by id.
    assert got.top_entity_ids == (a, b)
    # Every extraction waits, and so does the formation of alice's two
    # episodes; bob's formation was given up.
    assert (got.jobs_pending, got.jobs_failed) == (3 + 2, 1)


async def test_a_user_key_learns_nothing_of_another_users_memories(world):
    uow, pid, _ = world
    got = await stats(uow, ALICE, pid)
    assert (got.project_memories, got.user_memories) == (2, 2)
    assert got.archived_memories == 1  # the PROJECT one; bob's is not counted
    assert got.users == (("alice", 2),)
    assert got.user_count == 1
    assert got.top_entity_ids == ()  # not asked for


async def test_another_tenants_project_is_not_found_as_a_missing_one(world):
    uow, pid, _ = world
    with pytest.raises(NotFound) as theirs:
        await stats(uow, RIVAL, pid)
    with pytest.raises(NotFound) as missing:
        await stats(uow, RIVAL, pid + 1000)
    assert theirs.value.message == missing.value.message.replace(str(pid + 1000), str(pid))


async def test_a_read_mask_counts_only_what_it_names(world):
    uow, pid, (a, _, _, _) = world
    got = await stats(uow, TEAM, pid, top_entities=1, read_mask=["users", "user_count"])
    assert got.users == (("alice", 2), ("bob", 2))
    assert (got.user_count, got.user_memories, got.project_memories) == (2, 4, 2)
    # Not asked: not counted.
    assert (got.sessions, got.episodes, got.jobs_pending, got.entities) == (0, 0, 0, 0)
    assert got.top_entity_ids == ()
    hubs = await stats(uow, TEAM, pid, top_entities=1, read_mask=["top_entity_ids"])
    assert hubs.top_entity_ids == (a,) and hubs.episodes == 0 and hubs.users == ()


async def test_episodes_past_the_retention_are_not_counted(world):
    uow, _, _ = world
    kept = uow.projects.insert({"name": "kept", "retention": float(DAY)}, "acme").id
    session = uow.sessions.insert("s-kept", "", kept, {}, "acme").id
    now = time.time()
    for age in (3 * DAY, 60):
        uow.episodes.insert(session, "x", "y", {}, None, now - age)
    got = await stats(uow, TEAM, kept)
    listed = uow.episodes.list_page(session, None, 10, since=now - DAY)
    assert got.episodes == len(listed) == 1
    assert got.sessions == 1
