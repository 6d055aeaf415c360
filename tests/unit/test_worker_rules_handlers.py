"""What each job handler of nexus_grpc/workers/ makes of its unit of work's
answer: a write to commit, or the failure the queue settles
(workers/dependency_failures.py: an unreachable dependency waits, an answer
that would fail again gives up, anything else retries). The domain's work is
a scripted stand-in here (what it raises or returns); the vector index and
the embedder are in-memory stand-ins that record what they were asked; the
rows are tests/fakes.py's. The domain's own rules are the other unit files'
(test_extraction_rules.py, test_formation_job.py, test_summary_passes.py...);
the workers against a real store, index and model are
tests/integration/workers/ and tests/e2e/faults/."""

from __future__ import annotations

from typing import Any

import pytest

from nexus_grpc.core.jobs import INDEX_EPISODE, Job
from nexus_grpc.core.models import JobState
from nexus_grpc.core.vectors import CollectionNotFound, VectorIndexUnavailable, VectorPoint
from nexus_grpc.domain.summaries import NothingToSummarize
from nexus_grpc.domain.vector_collections import EPISODES, CollectionSpec
from nexus_grpc.errors import DependencyError, FailedPrecondition, NotFound, Unavailable
from nexus_grpc.workers import expiry, history_purge, retention
from nexus_grpc.workers.dependency_failures import failure_for
from nexus_grpc.workers.extractor import ExtractionHandler
from nexus_grpc.workers.indexer import Indexer, mark_episode_failed, note_episode_retry
from nexus_grpc.workers.memory_former import MemoryFormer
from nexus_grpc.workers.pending_entities import PendingEntityResolver
from nexus_grpc.workers.summarizer import SessionSummarizer
from nexus_grpc.workers.worker import GiveUp, Postpone, Retry
from tests.fakes import FakeDatabase, FakeUnitOfWork


class Down(DependencyError):
    unreachable = True


class CutOff(DependencyError):
    retryable = False


class Garbled(DependencyError):
    pass


def _jobs(*targets: int) -> list[Job]:
    return [Job(100 + t, "kind", t, 0, priority=1) for t in targets]


def _write(uow: Any) -> None:
    """A domain's write (never run here: the worker commits it)."""


class Scripted:
    """A unit of work's run: per target, what it raises, else ``_write``."""

    def __init__(self, raises: dict[int, Exception]) -> None:
        self.raises = raises
        self.asked: list[tuple] = []

    async def __call__(self, target: int, *rest: Any) -> Any:
        self.asked.append((target, *rest))
        if target in self.raises:
            raise self.raises[target]
        return _write


def _verdicts(outcomes: list) -> list[tuple[int, type | None, str]]:
    return [
        (o.job.target_id, type(o.error) if o.error else None, str(o.error or "")) for o in outcomes
    ]


# ---- dependency_failures: which failure wins (its three outcomes: test_error_roots.py) ---------


def test_unreachable_wins_over_not_retryable():
    class Both(DependencyError):
        unreachable, retryable = True, False

    assert type(failure_for(Both("no model"), "x")) is Postpone


# ---- the LLM handlers: extraction, pending entities, memory formation ------------------------


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda run: ExtractionHandler(_Run("run", run)), "extraction failed"),
        (
            lambda run: PendingEntityResolver(_Run("resolve_pending", run)),
            "entity resolution failed",
        ),
        (lambda run: MemoryFormer(_Run("run", run)), "memory formation failed"),
    ],
)
async def test_each_job_of_a_batch_gets_its_own_outcome(make, what):
    run = Scripted({2: Down("refused"), 3: CutOff("cut off"), 4: Garbled("not JSON")})
    outcomes = await make(run)(_jobs(1, 2, 3, 4))
    assert _verdicts(outcomes) == [
        (1, None, ""),
        (2, Postpone, f"{what}: refused"),
        (3, GiveUp, f"{what}: cut off"),
        (4, Retry, f"{what}: not JSON"),
    ]
    assert outcomes[0].write is _write
    assert [a[0] for a in run.asked] == [1, 2, 3, 4]  # one failure stops no other job


class _Run:
    """A domain object whose method ``name`` is ``run``."""

    def __init__(self, name: str, run: Scripted) -> None:
        setattr(self, name, run)


async def test_extraction_and_formation_run_at_the_jobs_priority():
    run = Scripted({})
    await ExtractionHandler(_Run("run", run))(_jobs(1))  # type: ignore[arg-type]
    await MemoryFormer(_Run("run", run))(_jobs(2))  # type: ignore[arg-type]
    assert run.asked == [(1, 1), (2, 1)]


async def test_formation_waits_while_the_similar_memories_cannot_be_searched():
    """Deciding without the owner's similar memories could add a duplicate."""
    run = Scripted({5: Unavailable("vector index down")})
    [outcome] = await MemoryFormer(_Run("run", run))(_jobs(5))  # type: ignore[arg-type]
    assert _verdicts([outcome]) == [(5, Postpone, "memory formation waits: vector index down")]


# ---- the summarizer ----------------------------------------------------------------------


class _Summaries:
    def __init__(self, raises: dict[int, Exception]) -> None:
        self.raises = raises

    async def run_session_summary(self, session_id: int) -> Any:
        if session_id in self.raises:
            raise self.raises[session_id]
        return type("Summary", (), {"id": 70 + session_id})()


async def test_a_summary_job_finishes_when_done_covered_already_or_its_session_gone():
    gone = NotFound("no session", resource_type="session", resource_name=2)
    summarizer = SessionSummarizer(_Summaries({1: NothingToSummarize(), 2: gone}))  # type: ignore[arg-type]
    outcomes = await summarizer.handle(_jobs(1, 2, 3))
    assert _verdicts(outcomes) == [(1, None, ""), (2, None, ""), (3, None, "")]
    assert [o.write for o in outcomes] == [None, None, None]  # the summary stored itself


async def test_a_summary_that_fails_retries_or_waits_as_its_failure_says():
    summarizer = SessionSummarizer(
        _Summaries({1: FailedPrecondition("session busy"), 2: Down("refused"), 3: CutOff("long")})  # type: ignore[arg-type]
    )
    assert _verdicts(await summarizer.handle(_jobs(1, 2, 3))) == [
        (1, Retry, "summary failed: session busy"),
        (2, Postpone, "summary failed: refused"),
        (3, GiveUp, "summary failed: long"),
    ]


# ---- the indexer ------------------------------------------------------------------------


class Embedder:
    dimension = 2

    def __init__(self, fails: Exception | None = None) -> None:
        self.fails = fails
        self.texts: list[str] = []

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if self.fails is not None:
            raise self.fails
        self.texts += texts
        return [[float(len(t)), 1.0] for t in texts]


class Index:
    def __init__(self, fails: list[Exception] | None = None) -> None:
        self.fails = list(fails or [])
        self.upserts: list[tuple[str, list[VectorPoint]]] = []
        self.deletes: list[tuple[str, list[int]]] = []
        self.ensured: list[str] = []

    async def ensure_collection(self, name: str, dimension: int, fields: dict) -> None:
        self.ensured.append(name)

    async def upsert(self, name: str, points: list[VectorPoint]) -> None:
        if self.fails:
            raise self.fails.pop(0)
        self.upserts.append((name, list(points)))

    async def delete(self, name: str, ids: list[int]) -> None:
        self.deletes.append((name, list(ids)))


DOCS = {1: ("first text", {"sessionId": 9}), 3: ("third", {"sessionId": 9})}
SPEC = CollectionSpec(
    "notes", "index:notes", "notes", {}, lambda _uow, ids: {i: DOCS[i] for i in ids if i in DOCS}
)


def _indexer(embedder: Embedder | None = None, index: Index | None = None) -> Indexer:
    return Indexer(FakeDatabase(), embedder or Embedder(), index or Index())  # type: ignore[arg-type]


async def test_rows_that_exist_are_embedded_and_upserted_and_gone_rows_deleted_once():
    indexer = _indexer()
    outcomes = await indexer.run(
        SPEC, [Job(1, "k", 1, 0), Job(2, "k", 2, 0), Job(3, "k", 1, 0), Job(4, "k", 3, 0)]
    )
    index = indexer.index
    assert [(p.id, p.vector, p.payload) for p in index.upserts[0][1]] == [
        (1, [10.0, 1.0], {"sessionId": 9}),
        (3, [5.0, 1.0], {"sessionId": 9}),
    ]
    assert index.deletes == [("notes", [2])]
    assert [o.error for o in outcomes] == [None] * 4  # the duplicate job finishes too


async def test_a_collection_the_index_lost_is_created_and_the_batch_applied():
    index = Index(fails=[CollectionNotFound("no collection notes")])
    indexer = _indexer(index=index)
    outcomes = await indexer.run(SPEC, [Job(1, "k", 1, 0)])
    assert index.ensured == ["notes"]
    assert [p.id for _, points in index.upserts for p in points] == [1]
    assert outcomes[0].error is None


async def test_an_index_that_is_away_postpones_the_batch_and_says_why_until_it_is_back():
    indexer = _indexer(index=Index(fails=[VectorIndexUnavailable("connection refused")]))
    outcomes = await indexer.run(SPEC, [Job(1, "k", 1, 0), Job(2, "k", 3, 0)])
    assert _verdicts(outcomes) == [
        (1, Postpone, "vector index unavailable: connection refused"),
        (3, Postpone, "vector index unavailable: connection refused"),
    ]
    assert indexer.index_error == "connection refused"
    await indexer.run(SPEC, [Job(3, "k", 1, 0)])
    assert indexer.index_error is None


async def test_an_embedder_failure_is_worth_what_it_says_and_a_bug_retries():
    down = _indexer(embedder=Embedder(fails=Down("embedder not loaded")))
    assert _verdicts(await down.run(SPEC, [Job(1, "k", 1, 0)])) == [
        (1, Postpone, "indexing failed: embedder not loaded")
    ]
    bug = _indexer(index=Index(fails=[ValueError("bad vector")]))
    assert _verdicts(await bug.run(SPEC, [Job(1, "k", 1, 0)])) == [
        (1, Retry, "indexing failed: bad vector")
    ]


async def test_indexed_episodes_are_marked_embedded_in_the_batchs_one_write():
    uow = FakeUnitOfWork()
    session = uow.sessions.insert("s", "", 0, {}, "")
    ids = [uow.episodes.insert(session.id, f"turn {n}", "", {}, None).id for n in range(2)]
    indexer = Indexer(FakeDatabase(uow), Embedder(), Index())  # type: ignore[arg-type]
    outcomes = await indexer.run(EPISODES, [Job(50 + i, INDEX_EPISODE, i, 0) for i in ids])
    assert outcomes[0].write is not None and outcomes[1].write is None
    outcomes[0].write(uow)
    assert [uow.episodes.rows[i].embed_state for i in ids] == [JobState.DONE, JobState.DONE]


async def test_a_batch_of_only_deletes_writes_nothing():
    outcomes = await _indexer().run(EPISODES, [Job(1, INDEX_EPISODE, 404, 0)])
    assert outcomes[0].write is None and outcomes[0].error is None


def test_an_episodes_index_failure_and_retry_show_on_the_episode():
    uow = FakeUnitOfWork()
    session = uow.sessions.insert("s", "", 0, {}, "")
    episode = uow.episodes.insert(session.id, "hi", "", {}, None)
    job = Job(1, INDEX_EPISODE, episode.id, 0)
    note_episode_retry(uow, job, "timeout")
    row = uow.episodes.rows[episode.id]
    assert (row.embed_state, row.embed_error) == (JobState.PENDING, "timeout")
    mark_episode_failed(uow, job, "dead")
    row = uow.episodes.rows[episode.id]
    assert (row.embed_state, row.embed_error) == (JobState.FAILED, "dead")


# ---- the scheduled sweeps: expiry, retention, history purge -------------------------------


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


def _recorder(calls: list) -> Any:
    def record(uow: Any, **kw: Any) -> None:
        calls.append((uow, kw))

    return record


async def test_each_expiry_job_removes_its_own_memory_at_the_batchs_time(monkeypatch):
    calls: list = []
    monkeypatch.setattr(expiry.memory_upkeep, "expire", _recorder(calls))
    monkeypatch.setattr(expiry, "time", _Clock(500.0))
    outcomes = await expiry.MemoryExpiry(history_retention=30.0).handle(_jobs(4, 9))
    for o in outcomes:
        o.write("uow")
    assert calls == [
        ("uow", {"memory_id": 4, "at": 500.0, "history_retention": 30.0}),
        ("uow", {"memory_id": 9, "at": 500.0, "history_retention": 30.0}),
    ]
    assert [o.error for o in outcomes] == [None, None]


async def test_each_retention_job_sweeps_its_own_project(monkeypatch):
    calls: list = []
    monkeypatch.setattr(retention.retention, "sweep", _recorder(calls))
    monkeypatch.setattr(retention, "time", _Clock(700.0))
    for o in await retention.sweep_retention(_jobs(2, 3)):
        o.write("uow")
    assert calls == [
        ("uow", {"project_id": 2, "at": 700.0}),
        ("uow", {"project_id": 3, "at": 700.0}),
    ]


async def test_each_purge_job_drops_its_own_memorys_history(monkeypatch):
    calls: list = []
    monkeypatch.setattr(history_purge.memory_upkeep, "purge_history", _recorder(calls))
    monkeypatch.setattr(history_purge, "time", _Clock(900.0))
    for o in await history_purge.purge_history(_jobs(6)):
        o.write("uow")
    assert calls == [("uow", {"memory_id": 6, "at": 900.0})]
