"""ReconcileIndex's rules (domain/reconcile.py) on the fakes of tests/fakes.py,
the index given as the ids each collection holds: a row missing from the
index and a point whose row is gone are each queued as their collection's
index job, an id whose job is already queued is left to it (a failed one is
not), and only the kinds with work are woken.

That the index jobs then embed and delete, and the RPC's wiring, are the
tiers with a real index: tests/integration/workers/test_index_pipeline.py
and tests/e2e/api/test_auth.py (who may call ReconcileIndex).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.reconcile import Reconciler, ReconcileResult
from tests.fakes import FakeDatabase, FakeUnitOfWork


class HeldIds:
    """The ids each collection of an index holds, handed out a page at a time
    as ``VectorIndex.ids`` does (nothing else of the index is read)."""

    def __init__(self, page: int = 2, **held: set[int]) -> None:
        self.held = held
        self.page = page

    async def ids(self, collection: str) -> AsyncIterator[list[int]]:
        ids = sorted(self.held.get(collection, set()))
        for start in range(0, len(ids), self.page):
            yield ids[start : start + self.page]


def _memory(uow: FakeUnitOfWork) -> int:
    values = {
        "kind": int(MemoryKind.PROJECT), "title": "t", "content": "c",
        "tier": int(Tier.LONGTERM), "project_id": 0, "agent_id": "", "user_id": "",
        "session_id": 0, "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    return uow.memories.insert(values, None, "t1").id


def _episodes(uow: FakeUnitOfWork, n: int) -> list[int]:
    session = uow.sessions.insert("s", "", 0, {}, "t1").id
    return [uow.episodes.insert(session, f"e{i}", "", {}, None).id for i in range(n)]


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def signals() -> JobSignals:
    return JobSignals()


async def _reconcile(uow: FakeUnitOfWork, signals: JobSignals, index: HeldIds) -> ReconcileResult:
    return await Reconciler(FakeDatabase(uow), index, signals).reconcile()  # type: ignore[arg-type]


async def test_rows_missing_from_the_index_and_orphaned_points_are_queued(uow, signals):
    episodes = _episodes(uow, 4)
    memory = _memory(uow)
    # The index has two of the episodes and a point of an episode long gone;
    # the memory's point is there, and one of a memory that is not.
    index = HeldIds(episodes={episodes[0], episodes[2], 99}, memories={memory, 77})
    result = await _reconcile(uow, signals, index)
    assert result == ReconcileResult(requeued=2, removed_orphans=2)
    assert uow.jobs.pending(jobs.INDEX_EPISODE) == [episodes[1], episodes[3], 99]
    assert uow.jobs.pending(jobs.INDEX_MEMORY) == [77]


async def test_only_the_kinds_with_work_are_woken(uow, signals):
    episodes = _episodes(uow, 1)
    await _reconcile(uow, signals, HeldIds(episodes=set()))
    assert uow.jobs.pending(jobs.INDEX_EPISODE) == episodes
    assert signals.event(jobs.INDEX_EPISODE).is_set()
    for idle in (jobs.INDEX_MEMORY, jobs.INDEX_ENTITY, jobs.INDEX_SUMMARY):
        assert not signals.event(idle).is_set()


async def test_an_index_in_agreement_queues_nothing(uow, signals):
    episodes = _episodes(uow, 3)
    memory = _memory(uow)
    index = HeldIds(episodes=set(episodes), memories={memory})
    assert await _reconcile(uow, signals, index) == ReconcileResult(0, 0)
    assert uow.jobs.rows == []
    assert not signals.event(jobs.INDEX_EPISODE).is_set()


async def test_an_id_whose_index_job_is_queued_is_left_to_that_job(uow, signals):
    episodes = _episodes(uow, 2)
    uow.jobs.enqueue(jobs.INDEX_EPISODE, [episodes[0], 55])
    index = HeldIds(episodes={55})  # 55's row is gone, its delete already queued
    result = await _reconcile(uow, signals, index)
    assert result == ReconcileResult(requeued=1, removed_orphans=0)
    assert uow.jobs.pending(jobs.INDEX_EPISODE) == [episodes[0], episodes[1], 55]


async def test_an_id_whose_index_job_failed_is_queued_again(uow, signals):
    (episode,) = _episodes(uow, 1)
    uow.jobs.enqueue(jobs.INDEX_EPISODE, [episode])
    (failed,) = uow.jobs.rows
    uow.jobs.dead_letter(failed.id, "the embedder was away")
    result = await _reconcile(uow, signals, HeldIds(episodes=set()))
    assert result == ReconcileResult(requeued=1, removed_orphans=0)
    assert uow.jobs.pending(jobs.INDEX_EPISODE) == [episode]
