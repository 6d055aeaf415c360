"""PostgreSQL as the system of record: the same behaviour as SQLite, and many
instances on one database.

Every test named ``*_on_both_stores`` runs against a real SQLite file and a
real PostgreSQL (the embedded server of tests/pg.py); the rest prove what
only a shared database can get wrong: concurrent migrations, a retry sent to
two instances at once, jobs claimed by several instances and taken over from
a dead one, and extraction events heard across instances.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import pytest

from nexus_grpc.core.models import NewEpisode
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.job_queue import JobQueue
from nexus_grpc.errors import AlreadyExists, NotFound
from nexus_grpc.store import Database, jobs, meta
from nexus_grpc.store import extraction_events as event_store
from nexus_grpc.store.postgres.database import PostgresDatabase, mask_url, translate
from nexus_grpc.store.postgres.migrations import LATEST_VERSION


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[Any]:
    if request.param == "sqlite":
        store: Any = Database(tmp_path / "nexus.sqlite3")
    else:
        store = PostgresDatabase(request.getfixturevalue("pg_url"))
    await store.open()
    yield store
    await store.close()


def conversations(store: Any) -> Conversations:
    # Conversations is typed for SQLite's Database; PostgresDatabase has its interface.
    return Conversations(cast(Database, store), JobSignals())


async def rows(store: Any, sql: str, params: tuple = ()) -> list[tuple]:
    return await store.read_sql(lambda c: [tuple(r) for r in c.execute(sql, params).fetchall()])


# The same behaviour on both stores


async def test_projects_sessions_and_episodes_round_trip_on_both_stores(db):
    conv = conversations(db)
    project = await conv.create_project({"name": "Atlas", "notes": "n"})
    session = await conv.create_session("", "first", project.id, {"k": "v"})
    assert (await conv.get_session(external_id=session.external_id)).id == session.id
    first = await conv.create_episode(session.id, "hello", "hi there", {}, "")
    second = await conv.create_episode(session.id, "how are you", "fine", {"m": 1}, "")
    assert second.id > first.id and second.metadata == {"m": 1}
    page = await conv.list_episodes(session.id, 10, "")
    assert [e.id for e in page.items] == [second.id, first.id]
    # Each episode's keyword context holds its neighbours' nearest turns.
    context = await rows(db, "SELECT id, context FROM episodes ORDER BY id")
    assert context == [(first.id, "\nhow are you"), (second.id, "hi there\n")]
    # Each new episode queued its embedding and its extraction, in its transaction.
    queued = await rows(db, "SELECT kind, target_id FROM jobs ORDER BY id")
    assert (jobs.INDEX_EPISODE, second.id) in queued
    assert (jobs.EXTRACT_EPISODE, second.id) in queued
    await conv.delete_episode(first.id)
    with pytest.raises(NotFound):
        await conv.get_episode(first.id)
    assert [e.id for e in (await conv.list_episodes(session.id, 10, "")).items] == [second.id]


async def test_a_duplicate_external_id_is_already_exists_and_writes_nothing_on_both_stores(db):
    conv = conversations(db)
    same = "6f1c1f9e-0a53-4a43-9d47-1a1d8c0e4a11"
    await conv.create_session(same, "a", 0, {})
    with pytest.raises(AlreadyExists, match="external_id"):
        await conv.create_session(same, "b", 0, {})
    assert await rows(db, "SELECT name FROM sessions") == [("a",)]


async def test_a_retried_episode_is_stored_once_on_both_stores(db):
    conv = conversations(db)
    session = await conv.create_session("", "", 0, {})
    first = await conv.create_episode(session.id, "q", "a", {}, "retry-1")
    again = await conv.create_episode(session.id, "q", "a", {}, "retry-1")
    assert again.id == first.id
    assert await rows(db, "SELECT COUNT(*) FROM episodes") == [(1,)]


async def test_jobs_claim_retry_and_dead_letter_on_both_stores(db):
    await db.write_sql(lambda c: jobs.SqlJobs(c).enqueue(jobs.INDEX_EPISODE, [1, 2]))
    first = await db.write_sql(lambda c: jobs.SqlJobs(c).claim(jobs.INDEX_EPISODE, 10))
    assert sorted(j.target_id for j in first) == [1, 2]
    # Work for target 1 arrives while its job runs: it waits for that one.
    await db.write_sql(lambda c: jobs.SqlJobs(c).enqueue(jobs.INDEX_EPISODE, [1, 3]))
    second = await db.write_sql(lambda c: jobs.SqlJobs(c).claim(jobs.INDEX_EPISODE, 10))
    assert [j.target_id for j in second] == [3]
    done = next(j for j in first if j.target_id == 1)
    await db.write_sql(lambda c: jobs.SqlJobs(c).finish([done.id]))
    third = await db.write_sql(lambda c: jobs.SqlJobs(c).claim(jobs.INDEX_EPISODE, 10))
    assert [j.target_id for j in third] == [1]
    other = next(j for j in first if j.target_id == 2)
    assert await db.write_sql(lambda c: jobs.SqlJobs(c).dead_letter(other.id, "boom"))
    depth = {d.kind: d for d in await db.read_sql(lambda conn: jobs.SqlJobs(conn).depths())}[
        jobs.INDEX_EPISODE
    ]
    assert (depth.pending, depth.failed) == (2, 1)  # 1 and 3 still running
    assert await db.write_sql(lambda c: jobs.SqlJobs(c).requeue_failed(jobs.INDEX_EPISODE)) == 1


async def test_extraction_events_page_in_order_and_by_tenant_on_both_stores(db):
    conv = conversations(db)
    session = await conv.create_session("", "", 0, {})
    ids = [
        await db.write_sql(
            lambda c, i=i: event_store.SqlExtractionEvents(c).insert(
                100 + i, session.id, 0, event_store.DONE
            )
        )
        for i in range(3)
    ]
    assert ids == sorted(ids)
    page = await db.read_sql(
        lambda c: event_store.SqlExtractionEvents(c).page_after(
            ids[0], event_store.EventFilter(), 10
        )
    )
    assert [e.episode_id for e in page] == [101, 102]
    other = event_store.EventFilter(tenant="someone-else")
    assert (
        await db.read_sql(lambda c: event_store.SqlExtractionEvents(c).page_after(0, other, 10))
        == []
    )


async def test_meta_upsert_on_both_stores(db):
    await db.write_sql(lambda c: meta.SqlMeta(c).put("k", "1"))
    await db.write_sql(lambda c: meta.SqlMeta(c).put("k", "2"))
    assert await db.read_sql(lambda c: meta.SqlMeta(c).get("k")) == "2"


# Only PostgreSQL


def test_placeholders_translate_outside_literals_only():
    assert translate("SELECT ? WHERE a LIKE '%?%' AND b = ?") == (
        "SELECT %s WHERE a LIKE '%%?%%' AND b = %s"
    )


def test_a_password_never_reaches_a_message():
    masked = mask_url("postgresql://nexus:s3cret@db.lan:5432/nexus")
    assert masked == "postgresql://***@db.lan:5432/nexus"
    assert mask_url("postgresql://db.lan/nexus") == "postgresql://db.lan/nexus"


async def test_instances_starting_together_migrate_once(pg_empty_url):
    instances = [PostgresDatabase(pg_empty_url) for _ in range(4)]
    await asyncio.gather(*(i.open() for i in instances))
    try:
        assert {i.schema_version for i in instances} == {LATEST_VERSION}
        versions = await rows(instances[0], "SELECT version FROM nexus_schema ORDER BY version")
        # One instance created the schema, at the latest version, in one go.
        assert versions == [(LATEST_VERSION,)]
    finally:
        for i in instances:
            await i.close()


@pytest.fixture
async def two(pg_url) -> AsyncIterator[tuple[PostgresDatabase, PostgresDatabase]]:
    a, b = PostgresDatabase(pg_url), PostgresDatabase(pg_url)
    await a.open()
    await b.open()
    yield a, b
    await a.close()
    await b.close()


async def test_a_retry_sent_to_two_instances_at_once_is_one_episode(two):
    a, b = two
    session = await conversations(a).create_session("", "", 0, {})
    for n in range(10):
        results = await asyncio.gather(
            *(
                conversations(db).create_episode(session.id, "q", "a", {}, f"retry-{n}")
                for db in (a, b, a, b)
            )
        )
        assert len({e.id for e in results}) == 1
    assert await rows(a, "SELECT COUNT(*) FROM episodes") == [(10,)]
    assert await rows(
        b, "SELECT COUNT(DISTINCT target_id) FROM jobs WHERE kind = ?", (jobs.INDEX_EPISODE,)
    ) == [(10,)]


async def test_instances_claiming_together_never_take_one_job_twice(two):
    a, b = two
    await a.write_sql(lambda c: jobs.SqlJobs(c).enqueue(jobs.INDEX_EPISODE, range(1, 301)))

    async def drain(db: PostgresDatabase) -> list[int]:
        taken: list[int] = []
        # A claim may come back empty while jobs remain (another instance
        # locked the same candidates): only an empty queue ends the drain.
        while await pending(db):
            batch = await db.write_sql(lambda c: jobs.SqlJobs(c).claim(jobs.INDEX_EPISODE, 7))
            taken += [j.target_id for j in batch]
        return taken

    got = await asyncio.gather(drain(a), drain(b), drain(a), drain(b))
    everything = [t for taken in got for t in taken]
    assert sorted(everything) == list(range(1, 301))  # each exactly once
    assert sum(1 for taken in got if taken) >= 2  # the work really was shared


async def pending(db: PostgresDatabase) -> int:
    [(count,)] = await rows(db, "SELECT COUNT(*) FROM jobs WHERE state = 'pending'")
    return int(count)


async def queue_for(db: PostgresDatabase, tenant: str, n: int) -> list[int]:
    """``n`` episodes of a session of ``tenant``, each with a bulk extraction job."""

    def write(uow: Any) -> list[int]:
        session = uow.sessions.insert(f"s-{tenant}-{n}", "", 0, {}, tenant)
        ids = uow.episodes.insert_many(
            [NewEpisode(session.id, f"{tenant} {i}", "", {}, None) for i in range(n)]
        )
        uow.jobs.enqueue(jobs.EXTRACT_EPISODE, ids, priority=jobs.BULK)
        return ids

    return await db.write(write)


async def test_each_instance_takes_tenants_in_turn(two):
    """Each instance remembers whom it served (domain/job_queue.TenantTurns):
    a tenant's new job waits for at most one claim per instance, behind a
    backlog of any size."""
    a, b = (JobQueue(db, jobs.EXTRACT_EPISODE) for db in two)
    await queue_for(two[0], "atlas", 200)
    first = [await q.claim(1, jobs.LEASE_SECONDS) for q in (a, b)]
    assert [job.tenant for [job] in first] == ["atlas", "atlas"]
    [bravo] = await queue_for(two[1], "bravo", 1)
    # b served atlas and never bravo: bravo's job is its next.
    [taken] = await b.claim(1, jobs.LEASE_SECONDS)
    assert (taken.tenant, taken.target_id) == ("bravo", bravo)
    [taken] = await a.claim(1, jobs.LEASE_SECONDS)
    assert taken.tenant == "atlas"


async def test_instances_claiming_two_tenants_together_take_each_job_once_in_turns(two):
    atlas = await queue_for(two[0], "atlas", 120)
    bravo = await queue_for(two[1], "bravo", 120)
    batches: list[list[str]] = []

    def took(taken: list[int], batch: list) -> None:
        taken += [j.target_id for j in batch]
        batches.append([j.tenant for j in batch])

    async def drain(q: JobQueue, db: PostgresDatabase, taken: list[int]) -> list[int]:
        while await pending(db):  # an empty claim may have lost a race
            if batch := await q.claim(6, jobs.LEASE_SECONDS):
                took(taken, batch)
        return taken

    dbs = (*two, *two)
    queues = [JobQueue(db, jobs.EXTRACT_EPISODE) for db in dbs]
    # Every claimer claims once, all at the same time, before any drains on:
    # on a busy machine one claimer could otherwise drain the queue alone
    # (it did once under CI), and the sharing below would be luck's.
    firsts = await asyncio.gather(*(q.claim(6, jobs.LEASE_SECONDS) for q in queues))
    started: list[list[int]] = [[] for _ in queues]
    for taken, batch in zip(started, firsts, strict=True):
        took(taken, batch)
    got = await asyncio.gather(
        *(drain(q, db, taken) for q, db, taken in zip(queues, dbs, started, strict=True))
    )
    assert sorted(t for taken in got for t in taken) == sorted(atlas + bravo)
    assert sum(1 for taken in got if taken) >= 2  # the work really was shared
    # A batch takes the tenants round by round (each one's oldest, then each
    # one's next), so a full batch holds both while both have jobs: instances
    # claiming together never hand one tenant's backlog a run of its own.
    assert all(set(b) == {"atlas", "bravo"} for b in batches if len(b) == 6)
    assert sum(len(b) == 6 for b in batches) >= len(batches) // 2


async def test_a_dead_instances_jobs_are_taken_over_when_the_lease_runs_out(two):
    a, b = two
    await a.write_sql(lambda c: jobs.SqlJobs(c).enqueue(jobs.EXTRACT_EPISODE, [5]))
    [job] = await a.write_sql(lambda c: jobs.SqlJobs(c).claim(jobs.EXTRACT_EPISODE, 10))
    # A live lease keeps the job with its instance...
    assert await b.write_sql(lambda c: jobs.SqlJobs(c).claim(jobs.EXTRACT_EPISODE, 10)) == []
    await a.write_sql(lambda c: jobs.SqlJobs(c).renew([job.id]))
    assert await b.write_sql(lambda c: jobs.SqlJobs(c).claim(jobs.EXTRACT_EPISODE, 10)) == []
    # ...and when instance a stops renewing (it died), the lease runs out.
    await a.close()
    await b.write_sql(
        lambda c: c.execute(
            "UPDATE jobs SET lease_until = lease_until - ?", (jobs.LEASE_SECONDS + 1,)
        )
    )
    [taken] = await b.write_sql(lambda c: jobs.SqlJobs(c).claim(jobs.EXTRACT_EPISODE, 10))
    assert (taken.id, taken.target_id) == (job.id, 5)
    assert taken.attempts == job.attempts + 1  # a job that kills instances reaches the dead letter
    await b.write_sql(lambda c: jobs.SqlJobs(c).finish([taken.id]))
    assert await rows(b, "SELECT COUNT(*) FROM jobs") == [(0,)]
    await a.open()  # for the fixture's close


async def test_restarting_an_instance_leaves_the_others_running_jobs_alone(two):
    a, b = two
    await a.write_sql(lambda c: jobs.SqlJobs(c).enqueue(jobs.INDEX_EPISODE, [1]))
    await a.write_sql(lambda c: jobs.SqlJobs(c).claim(jobs.INDEX_EPISODE, 10))
    assert await b.write_sql(lambda conn: jobs.SqlJobs(conn).reset_running()) == 0
    assert await rows(b, "SELECT state FROM jobs") == [("running",)]


class Heard:
    """What a listener heard, and a wait for what it should hear next."""

    def __init__(self) -> None:
        self.payloads: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, payload: str) -> None:
        self.payloads.append(payload)
        self._changed.set()

    async def until(self, done: Callable[[list[str]], bool]) -> None:
        async with asyncio.timeout(10):
            while not done(self.payloads):
                self._changed.clear()
                await self._changed.wait()


async def test_an_extraction_event_on_one_instance_wakes_listeners_on_another(two):
    a, b = two
    heard = Heard()
    b.listen(event_store.NOTIFY_CHANNEL, heard)
    # The listener wakes its subscriber once when it connects (it may have
    # missed events while it was away); wait for that before writing.
    await heard.until(lambda p: p == [""])
    session = await conversations(a).create_session("", "", 0, {})
    event_id = await a.write_sql(
        lambda c: event_store.SqlExtractionEvents(c).insert(1, session.id, 0, event_store.DONE)
    )
    await heard.until(lambda p: str(event_id) in p)
    assert heard.payloads == ["", str(event_id)]


async def test_a_rolled_back_event_wakes_no_one(two):
    a, b = two
    heard = Heard()
    b.listen(event_store.NOTIFY_CHANNEL, heard)
    await heard.until(lambda p: p == [""])

    def insert_then_fail(conn: sqlite3.Connection) -> None:
        event_store.SqlExtractionEvents(conn).insert(1, 1, 0, event_store.DONE)
        raise NotFound("rolled back", resource_type="test", resource_name="rollback")

    with pytest.raises(NotFound):
        await a.write_sql(insert_then_fail)
    # A committed event after it is heard alone.
    committed = await a.write_sql(
        lambda c: event_store.SqlExtractionEvents(c).insert(2, 1, 0, event_store.DONE)
    )
    await heard.until(lambda p: str(committed) in p)
    assert heard.payloads == ["", str(committed)]
