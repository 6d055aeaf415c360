"""Two writers at once on PostgreSQL, made to meet deterministically: one
transaction holds a row's lock while the other's statement waits on it (seen
in pg_locks), then the first commits and the second goes on.

- A budget's sweep (store/usage.defer_tenant_jobs) meets a claim: the job
  the claim took is running, and its own outcome settles it; the sweep,
  which read it as pending before the claim committed, must not date it
  tomorrow (the state is checked again on the row it writes).
- Two creates of the same words for one owner: the second's look for the
  owner's memories (store/memories.texts_of_owner) waits for the first's
  transaction and finds what it stored, so only one is kept.
"""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.store import usage
from nexus_grpc.store.postgres.database import PgConnection, PostgresDatabase
from nexus_grpc.store.postgres.database import _row_factory as store_rows
from nexus_grpc.store.unit_of_work import SqlUnitOfWork

FAR = 4_000_000_000.0


async def _waiting_on_a_lock(url: str, pid: int) -> None:
    """Returns once the backend ``pid`` waits for a lock (its statement is
    blocked by the other transaction)."""
    deadline = time.monotonic() + 20
    with psycopg.connect(url, autocommit=True) as watcher:
        while True:
            row = watcher.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            if row is not None and row[0] == "Lock":
                return
            assert time.monotonic() < deadline, "the second writer never waited on the lock"
            await asyncio.sleep(0.02)


@pytest.fixture
async def tenant_jobs(pg_url):
    """Two pending extraction jobs of tenant t1: their ids."""
    db = PostgresDatabase(pg_url)
    await db.open()
    try:

        def seed(uow) -> list[int]:
            session = uow.sessions.insert("s", "", 0, {}, "t1", "alice")
            ids = [uow.episodes.insert(session.id, f"hi {i}", "", {}, None).id for i in range(2)]
            uow.jobs.enqueue(jobs.EXTRACT_EPISODE, ids)
            found = uow.conn.execute(
                "SELECT id FROM jobs WHERE kind = ? ORDER BY id", (jobs.EXTRACT_EPISODE,)
            ).fetchall()
            return [int(r[0]) for r in found]

        yield await db.write(seed)
    finally:
        await db.close()


async def test_a_sweep_leaves_alone_a_job_a_claim_took_while_it_waited(pg_url, tenant_jobs):
    claimed, other = tenant_jobs
    with (
        psycopg.connect(pg_url) as claim,
        psycopg.connect(pg_url) as sweep,
    ):
        # The claim takes the first job and holds its row, uncommitted.
        claim.execute("UPDATE jobs SET state = 'running' WHERE id = %s", (claimed,))
        before = claim.execute("SELECT run_after FROM jobs WHERE id = %s", (claimed,)).fetchone()

        def run_sweep() -> list[int]:
            moved = usage.SqlUsage(PgConnection(sweep)).defer_tenant_jobs(
                jobs.EXTRACT_EPISODE, "t1", FAR, "over budget"
            )
            sweep.commit()
            return [j.id for j in moved]

        # The sweep reads both jobs as pending (the claim has not committed),
        # and waits on the claimed one's row.
        swept = asyncio.create_task(asyncio.to_thread(run_sweep))
        await _waiting_on_a_lock(pg_url, sweep.info.backend_pid)
        claim.commit()
        moved = await asyncio.wait_for(swept, 20)

    assert moved == [other]
    with psycopg.connect(pg_url, autocommit=True) as check:
        rows = dict(check.execute("SELECT id, run_after FROM jobs").fetchall())
        states = dict(check.execute("SELECT id, state FROM jobs").fetchall())
    # The running job keeps its due time: its own outcome settles it.
    assert (states[claimed], rows[claimed]) == ("running", before[0])
    assert (states[other], rows[other]) == ("pending", FAR)


async def test_a_second_look_for_the_same_words_waits_for_the_first_create(pg_url):
    owner = {"kind": int(MemoryKind.PROJECT), "project_id": 0, "agent_id": "", "user_id": "",
             "tier": int(Tier.LONGTERM), "session_id": None, "tenant": "t1"}  # fmt: skip
    row = {"title": "port", "content": "The staging database listens on port 5433.",
           "confidence": 1.0, "metadata": {}, **owner, "session_id": 0}  # fmt: skip
    with psycopg.connect(pg_url) as first, psycopg.connect(pg_url) as second:
        for conn in (first, second):
            conn.row_factory = store_rows  # rows by name, as the store reads them
        mine = SqlUnitOfWork(PgConnection(first))
        assert mine.memories.texts_of_owner(**owner, containing=["5433"]) == []
        stored = mine.memories.insert(row, None, "t1")

        def look() -> list:
            found = SqlUnitOfWork(PgConnection(second)).memories.texts_of_owner(
                **owner, containing=["5433"]
            )
            second.commit()
            return found

        looked = asyncio.create_task(asyncio.to_thread(look))
        # The second create's look waits on the owner while the first's
        # transaction holds it...
        await _waiting_on_a_lock(pg_url, second.info.backend_pid)
        first.commit()
        # ...and then reads what it stored: the same words, not stored twice.
        found = await asyncio.wait_for(looked, 20)
    assert [memory_id for memory_id, _, _ in found] == [stored.id]
