"""Tenants take turns at the job queue (core/jobs.py's claim order): a claim
serves the tenant its claimer served least recently first, so one tenant's
backlog delays another's job by at most the claim already made. Run on the
fakes through the domain's JobQueue, as a worker claims."""

from __future__ import annotations

from nexus_grpc.core import jobs
from nexus_grpc.domain.job_queue import JobQueue, TenantTurns
from tests.fakes import FakeDatabase, FakeUnitOfWork


def episodes(uow: FakeUnitOfWork, tenant: str, n: int) -> list[int]:
    session = uow.sessions.insert(f"s-{tenant}-{len(uow.sessions.rows)}", "", 0, {}, tenant)
    return [uow.episodes.insert(session.id, f"{tenant} {i}", "", {}, None).id for i in range(n)]


def queue(uow: FakeUnitOfWork, tenant: str, n: int, priority: int = jobs.BULK) -> list[int]:
    ids = episodes(uow, tenant, n)
    uow.jobs.enqueue(jobs.EXTRACT_EPISODE, ids, priority=priority)
    return ids


async def claims(q: JobQueue, n: int, batch: int = 1) -> list[list[str]]:
    """The tenants of ``n`` claims in a row, each batch finished before the next."""
    out = []
    for _ in range(n):
        taken = await q.claim(batch, jobs.LEASE_SECONDS)
        q.db.uow.jobs.finish([j.id for j in taken])
        out.append([j.tenant for j in taken])
    return out


async def test_a_tenants_job_is_claimed_next_however_large_the_backlog_ahead_of_it():
    db = FakeDatabase()
    q = JobQueue(db, jobs.EXTRACT_EPISODE)
    queue(db.uow, "atlas", 2000)
    assert await claims(q, 1) == [["atlas"]]  # one of atlas's import is running
    bravo = queue(db.uow, "bravo", 1)
    [[job]] = [await q.claim(1, jobs.LEASE_SECONDS)]
    assert (job.tenant, job.target_id) == ("bravo", bravo[0])


async def test_a_tenant_served_last_waits_for_one_job_of_the_backlog():
    db = FakeDatabase()
    q = JobQueue(db, jobs.EXTRACT_EPISODE)
    queue(db.uow, "atlas", 2000)
    queue(db.uow, "bravo", 1)
    assert await claims(q, 2) == [["atlas"], ["bravo"]]
    queue(db.uow, "bravo", 1)  # bravo was served last: atlas's turn first
    assert await claims(q, 3) == [["atlas"], ["bravo"], ["atlas"]]


async def test_a_job_queued_before_any_claim_waits_for_one_of_the_older_backlog():
    db = FakeDatabase()
    q = JobQueue(db, jobs.EXTRACT_EPISODE)
    queue(db.uow, "atlas", 2000)
    queue(db.uow, "bravo", 1)
    # Neither served yet: the older job first, then the other tenant's.
    assert await claims(q, 3) == [["atlas"], ["bravo"], ["atlas"]]


async def test_two_backlogs_alternate_at_the_same_priority():
    db = FakeDatabase()
    q = JobQueue(db, jobs.EXTRACT_EPISODE)
    queue(db.uow, "atlas", 5, jobs.LIVE)
    queue(db.uow, "bravo", 3, jobs.LIVE)
    got = [t for [t] in await claims(q, 8)]
    assert got == ["atlas", "bravo"] * 3 + ["atlas", "atlas"]


async def test_a_batch_takes_each_tenants_oldest_then_each_ones_next():
    db = FakeDatabase()
    q = JobQueue(db, jobs.INDEX_EPISODE)
    for tenant, n in (("atlas", 5), ("bravo", 2), ("cargo", 1)):
        db.uow.jobs.enqueue(jobs.INDEX_EPISODE, episodes(db.uow, tenant, n))
    [first] = await claims(q, 1, batch=6)
    assert first == ["atlas", "bravo", "cargo", "atlas", "bravo", "atlas"]
    # cargo is served least recently of the three now, but has nothing left.
    assert await claims(q, 1, batch=6) == [["atlas", "atlas"]]


async def test_live_work_comes_before_any_tenants_bulk_work():
    db = FakeDatabase()
    q = JobQueue(db, jobs.EXTRACT_EPISODE)
    queue(db.uow, "atlas", 2, jobs.LIVE)
    queue(db.uow, "bravo", 2, jobs.BULK)
    # bravo was never served, atlas was: turns apply within a priority only.
    assert [t for [t] in await claims(q, 4)] == ["atlas", "atlas", "bravo", "bravo"]


def test_turns_remember_the_least_recently_served_first_and_forget_the_oldest():
    turns = TenantTurns(remember=3)
    turns.served(["a", "b", "a", "c"])
    assert turns.order() == ["b", "a", "c"]
    turns.served(["d"])
    # b, served longest ago, is forgotten: a claim puts it first, where it was anyway.
    assert turns.order() == ["a", "c", "d"]
