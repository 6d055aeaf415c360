"""What the erasure worker and the storage upkeep decide
(nexus_grpc/workers/eraser.py, storage_upkeep.py), on the fakes: an
erasure's job runs its next step, waits on its disk phase until the index
work and the scrub are done, then finishes; a scrub covers what was deleted
before it started and runs once it is due; extraction events past their
retention are purged hourly, a chunk a transaction. The database's own scrub
and the index's compaction are stand-ins that record the calls. The steps'
own rules are domain/erasure.py's (tests/unit/test_erasure_rules.py); the
files' bytes are the whole-server erasure tests'."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from nexus_grpc.core import erasure as e
from nexus_grpc.core.jobs import ERASE, Job
from nexus_grpc.domain import erasure as erasing
from nexus_grpc.domain import event_retention
from nexus_grpc.domain.vector_collections import ALL as COLLECTIONS
from nexus_grpc.workers.eraser import RECHECK_SECONDS, Eraser, Scrubber
from nexus_grpc.workers.storage_upkeep import PURGE_EVERY, StorageUpkeep
from tests.fakes import FakeDatabase, FakeUnitOfWork


class ScrubbingDatabase(FakeDatabase):
    """The fakes' database with the engine's scrub: scripted answers."""

    def __init__(self, uow: FakeUnitOfWork | None = None, scrubs: list[bool] | None = None):
        super().__init__(uow)
        self.scrubs = list(scrubs or [])
        self.scrubbed = 0

    async def scrub(self) -> bool:
        self.scrubbed += 1
        return self.scrubs.pop(0) if self.scrubs else True


class CompactingIndex:
    def __init__(self) -> None:
        self.compacted: list[tuple[str, Any]] = []

    async def compact(self, collection: str, live: Any) -> int:
        self.compacted.append((collection, await live()))
        return 0


def _scrubber(db: ScrubbingDatabase) -> Scrubber:
    return Scrubber(db, CompactingIndex())  # type: ignore[arg-type]


# ---- Scrubber ---------------------------------------------------------------------------


async def test_a_scrub_compacts_every_collection_to_its_live_rows_then_the_database():
    uow = FakeUnitOfWork()
    session = uow.sessions.insert("s", "", 0, {}, "")
    episode = uow.episodes.insert(session.id, "hi", "", {}, None)
    db = ScrubbingDatabase(uow)
    scrubber = _scrubber(db)
    assert await scrubber.scrub(since=time.time()) is True
    compacted = dict(scrubber.index.compacted)  # type: ignore[attr-defined]
    assert list(compacted) == [spec.name for spec in COLLECTIONS]
    assert compacted["episodes"] == {episode.id}
    assert db.scrubbed == 1


async def test_deletes_committed_before_the_last_scrub_started_need_no_other():
    db = ScrubbingDatabase()
    scrubber = _scrubber(db)
    before = time.time()
    await scrubber.scrub(since=before)
    assert await scrubber.scrub(since=before) is True
    assert db.scrubbed == 1  # covered: nothing ran again
    await scrubber.scrub(since=time.time() + 1.0)  # a delete after it started
    assert db.scrubbed == 2


async def test_a_database_scrub_that_could_not_finish_covers_nothing():
    db = ScrubbingDatabase(scrubs=[False])
    scrubber = _scrubber(db)
    assert await scrubber.scrub(since=1.0) is False
    assert scrubber.covered_until == 0.0
    assert await scrubber.scrub(since=1.0) is True  # tried again
    assert db.scrubbed == 2


# ---- Eraser -----------------------------------------------------------------------------


def _erasure(uow: FakeUnitOfWork, **kw: Any) -> e.Erasure:
    erasure = e.Erasure(id=5, tenant="acme", kind=e.USER, state=e.RUNNING, phase=e.EPISODES)
    erasure = replace(erasure, **kw)
    uow.erasures.rows[erasure.id] = (erasure, "digest")
    return erasure


async def test_a_gone_or_finished_erasures_job_just_finishes():
    uow = FakeUnitOfWork()
    eraser = Eraser(ScrubbingDatabase(uow), _scrubber(ScrubbingDatabase(uow)))  # type: ignore[arg-type]
    [gone] = await eraser([Job(1, ERASE, 404, 0)])
    _erasure(uow, state=e.DONE, phase=e.FINISHED)
    [done] = await eraser([Job(2, ERASE, 5, 0)])
    assert (gone.write, gone.error, done.write, done.error) == (None, None, None, None)


async def test_an_erasure_before_its_disk_phase_runs_its_next_step_and_queues_the_one_after():
    uow = FakeUnitOfWork()
    _erasure(uow, phase=e.EPISODES, user_id="ann")  # who holds nothing: the phase ends
    eraser = Eraser(ScrubbingDatabase(uow), _scrubber(ScrubbingDatabase(uow)))  # type: ignore[arg-type]
    [outcome] = await eraser([Job(1, ERASE, 5, 0)])
    assert outcome.error is None and outcome.write is not None
    outcome.write(uow)
    after = uow.erasures.get(5)
    assert after is not None and after.phase != e.EPISODES and not after.done
    assert uow.jobs.pending(ERASE) == [5]


async def test_the_disk_phase_waits_for_index_work_queued_before_it():
    uow = FakeUnitOfWork()
    _erasure(uow, phase=e.DISK, carry={"disk_at": time.time() + 60})
    uow.jobs.enqueue("index:episodes", [1], run_after=time.time())  # queued before the phase
    db = ScrubbingDatabase(uow)
    [outcome] = await Eraser(db, _scrubber(db))([Job(1, ERASE, 5, 0)])  # type: ignore[arg-type]
    assert db.scrubbed == 0  # nothing scrubbed while points may still be on the index
    outcome.write(uow)
    job = uow.jobs.pending_job(ERASE, 5)
    assert job is not None and job.run_after >= time.time() + RECHECK_SECONDS - 1.0
    assert not uow.erasures.get(5).done


async def test_the_disk_phase_waits_while_the_scrub_cannot_finish():
    uow = FakeUnitOfWork()
    _erasure(uow, phase=e.DISK, carry={"disk_at": 1.0})
    db = ScrubbingDatabase(uow, scrubs=[False])
    [outcome] = await Eraser(db, _scrubber(db))([Job(1, ERASE, 5, 0)])  # type: ignore[arg-type]
    outcome.write(uow)
    assert uow.jobs.pending(ERASE) == [5] and not uow.erasures.get(5).done


async def test_a_scrubbed_disk_phase_finishes_the_erasure_and_forgets_the_user():
    uow = FakeUnitOfWork()
    _erasure(uow, phase=e.DISK, user_id="ann", carry={"disk_at": 1.0, "kept": 1})
    db = ScrubbingDatabase(uow)
    [outcome] = await Eraser(db, _scrubber(db))([Job(1, ERASE, 5, 0)])  # type: ignore[arg-type]
    assert db.scrubbed == 1
    outcome.write(uow)
    done = uow.erasures.get(5)
    assert (done.state, done.phase, done.user_id, done.carry) == (
        e.DONE,
        e.FINISHED,
        "",
        {"kept": 1},
    )
    assert uow.jobs.pending(ERASE) == []


# ---- StorageUpkeep ------------------------------------------------------------------------


def _upkeep(uow: FakeUnitOfWork, scrubs: list[bool] | None = None) -> tuple[StorageUpkeep, Any]:
    db = ScrubbingDatabase(uow, scrubs)
    return StorageUpkeep(db, _scrubber(db), event_retention_seconds=100.0), db  # type: ignore[arg-type]


async def test_a_scrub_runs_once_it_is_due_and_is_then_cleared():
    uow = FakeUnitOfWork()
    uow.meta.put(erasing.SCRUB_DUE, repr(1000.0))
    upkeep, db = _upkeep(uow)
    await upkeep.run_due(at=999.0)
    assert db.scrubbed == 0 and erasing.scrub_due(uow) == 1000.0
    await upkeep.run_due(at=1000.0)
    assert db.scrubbed == 1 and erasing.scrub_due(uow) is None


async def test_a_scrub_that_could_not_finish_stays_asked_for():
    uow = FakeUnitOfWork()
    uow.meta.put(erasing.SCRUB_DUE, repr(10.0))
    upkeep, db = _upkeep(uow, scrubs=[False])
    await upkeep.run_due(at=20.0)
    assert db.scrubbed == 1 and erasing.scrub_due(uow) == 10.0


def _events(uow: FakeUnitOfWork, created: list[float]) -> None:
    session = uow.sessions.insert(f"s{len(uow.sessions.rows)}", "", 0, {}, "")
    for at in created:
        event_id = uow.events.insert(1, session.id, 0, 1)
        event, tenant = uow.events.rows[event_id]
        uow.events.rows[event_id] = (replace(event, created_at=at), tenant)


async def test_events_past_their_retention_go_at_the_first_run_then_hourly(monkeypatch):
    uow = FakeUnitOfWork()
    _events(uow, [10.0, 20.0, 950.0])
    upkeep, _ = _upkeep(uow)
    await upkeep.run_due(at=1000.0)  # retention 100 s: kept from 900 on
    assert [ev.created_at for ev, _ in uow.events.rows.values()] == [950.0]
    _events(uow, [960.0])
    await upkeep.run_due(at=1000.0 + PURGE_EVERY - 1)  # not the hour yet
    assert len(uow.events.rows) == 2
    await upkeep.run_due(at=1000.0 + PURGE_EVERY)
    assert uow.events.rows == {}


async def test_a_purge_goes_a_chunk_a_transaction_until_a_chunk_is_short(monkeypatch):
    monkeypatch.setattr(event_retention, "CHUNK", 2)
    uow = FakeUnitOfWork()
    _events(uow, [1.0, 2.0, 3.0, 4.0, 5.0])
    writes = []
    upkeep, db = _upkeep(uow)
    real_write = db.write

    async def counted(fn):
        writes.append(1)
        return await real_write(fn)

    db.write = counted
    assert await upkeep.purge_events(at=1000.0) == 5
    assert len(writes) == 3  # 2 + 2 + 1
