"""Memory expiry (domain/memories.py and domain/memory_upkeep.py), decided by
the domain on the fakes of tests/fakes.py.

An expiry is an expire_time in the future or a positive ttl of at most 100
years; anything else is refused by name and writes nothing. Each write with
an expiry schedules the ``expire:memory`` job for it in its own transaction;
the job removes a memory whose expiry passed, reschedules one whose expiry
moved later, and leaves one that no longer expires. An expired memory is
missing by id (get, update, delete) and from the listing, and leaves
the cap, at once, before the job runs (the count is the store's
``count_in_cap_scope``, the same on the fake, SQLite and PostgreSQL by
tests/integration/store/test_repository_contract.py). What a client sees over gRPC (the
status codes, every read hiding it, the worker removing the row and its
point) is tests/e2e/service/test_memory_expiry.py's.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.models import MemoryKind, MemoryScope
from nexus_grpc.core.records import EXPIRE, UPDATE
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import memory_upkeep
from nexus_grpc.domain.memories import Memories
from nexus_grpc.errors import FailedPrecondition, InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork

P, U = int(MemoryKind.PROJECT), int(MemoryKind.USER)
ALICE: dict[str, Any] = {"kind": U, "user_id": "alice", "title": "t", "content": "c"}


def memories(uow: FakeUnitOfWork, cap: int = 100) -> Memories:
    # Neither the embedder nor the vector index is read by these rules.
    return Memories(FakeDatabase(uow), JobSignals(), None, None, cap=cap)  # type: ignore[arg-type]


def due(uow: FakeUnitOfWork, memory_id: int) -> float | None:
    job = uow.jobs.pending_job(jobs.EXPIRE_MEMORY, memory_id)
    return None if job is None else job.run_after


async def test_a_bad_expiry_is_refused_by_name_and_writes_nothing():
    uow = FakeUnitOfWork()
    m = memories(uow)
    for expiry, message in (
        ({"ttl": 0.0}, "memory.ttl must be positive, got 0.0 seconds"),
        ({"ttl": -5.0}, "memory.ttl must be positive, got -5.0 seconds"),
        ({"ttl": float("nan")}, "memory.ttl must be positive, got nan seconds"),
        (
            {"ttl": 200 * 365 * 86400.0},
            "memory.ttl is 6307200000 seconds; the limit is 3153600000 (100 years)",
        ),
        (
            {"expire_time": time.time() - 10},
            "memory.expire_time is in the past: it would expire on arrival",
        ),
    ):
        with pytest.raises(InvalidArgument) as err:
            await m.create({**ALICE, **expiry})
        assert err.value.message.startswith(message), err.value.message
        assert err.value.field == f"memory.{next(iter(expiry))}"
    assert uow.memories.rows == {} and uow.jobs.rows == []


async def test_each_write_schedules_the_job_for_its_expiry_and_the_job_rereads_it():
    uow = FakeUnitOfWork()
    m = memories(uow)
    start = time.time()
    made = await m.create({**ALICE, "ttl": 3600.0})
    assert made.expire_at is not None and abs(made.expire_at - (start + 3600)) < 5
    assert due(uow, made.id) == made.expire_at
    assert due(uow, (await m.create({**ALICE, "title": "lasting"})).id) is None
    # Moved sooner, then cleared: the job stays where the sooner write put it.
    soon = time.time() + 1
    moved = await m.update(made.id, {"expire_time": soon}, ["expire_time"], "alice")
    assert moved.expire_at == soon and due(uow, made.id) == soon
    cleared = await m.update(made.id, {}, ["expire_time"], "alice")
    assert cleared.expire_at is None
    # The job runs and finds a memory that no longer expires: it stays.
    memory_upkeep.expire(uow, made.id, soon + 1, m.history_retention)
    assert uow.memories.find(made.id) is not None
    revisions = (await m.history(made.id, "alice", 0, 0, "")).items
    assert [(r.action, r.changed) for r in revisions] == [
        (UPDATE, ["expire_time"]),
        (UPDATE, ["expire_time"]),
    ]


async def test_the_job_reschedules_an_expiry_moved_later_and_removes_one_passed():
    uow = FakeUnitOfWork()
    m = memories(uow)
    made = await m.create({**ALICE, "content": "brief", "ttl": 3600.0})
    assert made.expire_at is not None
    # Its job, moved sooner by an earlier write, runs an hour early: not yet,
    # and queued again for the expiry.
    job = uow.jobs.pending_job(jobs.EXPIRE_MEMORY, made.id)
    assert job is not None
    job.run_after = 0.0
    assert [j.target_id for j in uow.jobs.claim(jobs.EXPIRE_MEMORY, 10)] == [made.id]
    memory_upkeep.expire(uow, made.id, time.time(), m.history_retention)
    assert uow.memories.find(made.id) is not None and due(uow, made.id) == made.expire_at
    # Once it passed: gone, its last version kept in its history as expired.
    memory_upkeep.expire(uow, made.id, made.expire_at + 1, m.history_retention)
    assert uow.memories.find(made.id) is None
    [revision] = uow.memories.page(made.id, None, 10)
    assert (revision.action, revision.previous.content) == (EXPIRE, "brief")


async def test_an_expired_memory_leaves_the_cap_before_the_job_removes_it():
    uow = FakeUnitOfWork()
    m = memories(uow, cap=1)
    first = await m.create({**ALICE, "title": "a", "ttl": 3600.0})
    with pytest.raises(FailedPrecondition, match="user 'alice' already holds 1 USER memories"):
        await m.create({**ALICE, "title": "b"})
    # Time passes for this memory only: its expiry is in the past, the job an
    # hour away.
    uow.memories.update(first.id, {"expire_at": time.time() - 1})
    assert (await m.create({**ALICE, "title": "b"})).title == "b"


async def test_an_expired_memory_is_hidden_by_id_and_from_listing_before_the_job_runs():
    uow = FakeUnitOfWork()
    m = memories(uow)
    project = uow.projects.insert({"name": "p"}).id
    keep = await m.create({**ALICE, "kind": P, "user_id": "", "project_id": project})
    later = await m.create({**ALICE, "project_id": project, "ttl": 3600.0})
    scope = MemoryScope(project_id=project, user_id="alice")
    # The positive case first: before its expiry, its owner reads it everywhere.
    assert (await m.get(later.id, "alice")).id == later.id
    listed = await m.list_visible(scope, 0, 0, "")
    assert {x.id for x in listed.items} == {keep.id, later.id}
    # Time passes for this memory only: its expiry is in the past, the job an
    # hour away.
    uow.memories.update(later.id, {"expire_at": time.time() - 1})
    assert [x.id for x in (await m.list_visible(scope, 0, 0, "")).items] == [keep.id]
    for call in (
        m.get(later.id, "alice"),
        m.update(later.id, {"title": "x"}, ["title"], "alice"),
        m.delete(later.id, "alice"),
    ):
        with pytest.raises(NotFound, match=f"memory {later.id} does not exist"):
            await call
    # The row is still there, unchanged, for the job to remove.
    row = uow.memories.find(later.id)
    assert row is not None and row.title == "t"
    assert uow.memories.page(later.id, None, 10) == []
