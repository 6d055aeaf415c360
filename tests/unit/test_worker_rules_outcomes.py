"""What a job worker (nexus_grpc/workers/worker.py) does with a batch's
outcomes, on the fakes: a success's write and the job's row go together, a
failed attempt is settled by the queue's rule with the worker's hooks told,
a gate's held jobs are not run, a handler's or a recording's failure becomes
a retry, and a dependency that stays down pauses the whole worker, doubling
up to its cap. The worker is driven by its own steps (``_process``,
``_record``, ``_note_dependency``, ``_idle_timeout``) with a fake clock: no
task loop, no sleeps. The queue's own arithmetic (backoff, attempts) is
domain/job_queue.py's; a worker running against a real store and model is
tests/e2e/faults/test_fault_ollama.py's."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from nexus_grpc.core import llm_usage
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.llm_usage import LLMCall
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.workers import worker as worker_module
from nexus_grpc.workers.worker import (
    Defer,
    GiveUp,
    JobWorker,
    Outcome,
    Postpone,
    Retry,
    WorkerConfig,
)
from tests.fakes import FakeDatabase, FakeUnitOfWork

KIND = "index:episodes"
CONFIG = WorkerConfig(
    batch_size=10, max_attempts=3, postpone_delay=5.0, postpone_max=60.0, idle_poll=5.0
)


class Clock:
    """worker.py's ``time`` module, at a time the test sets."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    # The fakes' own rows keep the real clock; only the worker's pause reads this one.
    import time

    c = Clock(time.time())
    monkeypatch.setattr(worker_module, "time", c)
    return c


def _worker(db: FakeDatabase, handler: Any = None, **kw: Any) -> tuple[JobWorker, dict]:
    told: dict[str, list] = {"dead": [], "retry": [], "commits": []}
    w = JobWorker(
        db,  # type: ignore[arg-type]
        JobSignals(),
        KIND,
        handler or _succeed,
        kw.pop("config", CONFIG),
        on_dead=lambda _u, job, msg: told["dead"].append((job.target_id, msg)),
        on_retry=lambda _u, job, msg: told["retry"].append((job.target_id, msg)),
        after_commit=lambda: told["commits"].append(1),
        **kw,
    )
    return w, told


async def _succeed(batch: list[Job]) -> list[Outcome]:
    return [Outcome(j) for j in batch]


def _claimed(uow: FakeUnitOfWork, *targets: int, attempts: int = 0) -> list[Job]:
    uow.jobs.enqueue(KIND, targets)
    for row in uow.jobs.rows:
        row.attempts = attempts
    return uow.jobs.claim(KIND, 10)


def _row(uow: FakeUnitOfWork, target: int) -> Any:
    return next(j for j in uow.jobs.rows if j.target_id == target)


# ---- _record: one batch's outcomes, in one transaction -----------------------


def test_a_success_runs_its_write_and_its_job_row_goes_with_it():
    uow = FakeUnitOfWork()
    w, told = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7)
    wrote = []
    w._record(uow, [Outcome(job, write=lambda u: wrote.append(u))])
    assert wrote == [uow]
    assert uow.jobs.rows == []
    assert told["dead"] == told["retry"] == []


def test_a_retry_puts_the_job_back_with_an_attempt_spent_and_tells_its_target():
    uow = FakeUnitOfWork()
    w, told = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7)
    w._record(uow, [Outcome(job, error=Retry("model timed out"))])
    row = _row(uow, 7)
    assert (row.state, row.attempts, row.last_error) == ("pending", 1, "model timed out")
    assert told["retry"] == [(7, "model timed out")] and told["dead"] == []


def test_the_last_attempt_dead_letters_the_job_and_tells_on_dead_why():
    uow = FakeUnitOfWork()
    w, told = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7, attempts=CONFIG.max_attempts - 1)
    w._record(uow, [Outcome(job, error=Retry("bad answer"))])
    assert _row(uow, 7).state == "failed"
    assert told["dead"] == [(7, "bad answer")] and told["retry"] == []


def test_give_up_dead_letters_on_the_first_attempt():
    uow = FakeUnitOfWork()
    w, told = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7)
    w._record(uow, [Outcome(job, error=GiveUp("answer cut off"))])
    assert _row(uow, 7).state == "failed"
    assert told["dead"] == [(7, "answer cut off")]


def test_a_postponed_job_spends_no_attempt_but_its_target_still_shows_why():
    uow = FakeUnitOfWork()
    w, told = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7)
    w._record(uow, [Outcome(job, error=Postpone("ollama unreachable"))])
    row = _row(uow, 7)
    assert (row.state, row.attempts, row.last_error) == ("pending", 0, "ollama unreachable")
    assert told["retry"] == [(7, "ollama unreachable")]


def test_an_error_without_words_is_named_by_its_type():
    uow = FakeUnitOfWork()
    w, told = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7)
    w._record(uow, [Outcome(job, error=Retry())])
    assert told["retry"] == [(7, "Retry")]
    assert _row(uow, 7).last_error == "Retry"


def test_a_dead_job_whose_work_was_queued_again_tells_no_one():
    """Verdict GONE: the row went because a pending job covers the same work;
    neither hook hears of it (the target is not failed)."""
    uow = FakeUnitOfWork()
    w, told = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7, attempts=CONFIG.max_attempts - 1)
    uow.jobs.enqueue(KIND, [7])  # queued again while it ran
    w._record(uow, [Outcome(job, error=Retry("bad answer"))])
    assert told["dead"] == told["retry"] == []
    assert [(j.state, j.id != job.id) for j in uow.jobs.rows] == [("pending", True)]


def test_a_defers_sweep_tells_every_job_held_for_the_same_reason():
    uow = FakeUnitOfWork()
    w, told = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7)
    others = [Job(90, KIND, 8, 0), Job(91, KIND, 9, 0)]
    held = Defer("budget spent", until=0.0, sweep=lambda _u: others)
    w._record(uow, [Outcome(job, error=held)])
    assert told["retry"] == [(7, "budget spent"), (8, "budget spent"), (9, "budget spent")]
    assert _row(uow, 7).attempts == 0


def test_the_batchs_llm_calls_are_written_with_its_outcomes():
    uow = FakeUnitOfWork()
    w, _ = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7)
    call = LLMCall("extract", 1, "atlas", 10, 5, 0.5, "ok", 0.0)
    w._record(uow, [Outcome(job, error=Retry("x"))], [call])
    assert uow.usage.rows == [call]


def test_the_retry_policy_is_read_from_the_config_when_a_job_fails():
    uow = FakeUnitOfWork()
    w, told = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7, attempts=1)
    w.config = replace(CONFIG, max_attempts=2)  # replaced while the worker runs
    assert w.policy.max_attempts == 2
    w._record(uow, [Outcome(job, error=Retry("again"))])
    assert told["dead"] == [(7, "again")]


# ---- _process: the gate, the handler and the recording ------------------------


async def test_jobs_the_gate_holds_are_not_run_and_wait_without_an_attempt(clock):
    uow = FakeUnitOfWork()
    ran: list[int] = []

    async def handler(batch: list[Job]) -> list[Outcome]:
        ran.extend(j.target_id for j in batch)
        return [Outcome(j) for j in batch]

    async def gate(kind: str, batch: list[Job]) -> dict[int, Defer]:
        assert kind == KIND
        return {j.id: Defer("tenant over budget", until=0.0) for j in batch if j.target_id == 8}

    w, told = _worker(FakeDatabase(uow), handler, gate=gate)
    batch = _claimed(uow, 7, 8)
    w._slots = SimpleNamespace(release=lambda: None)  # type: ignore[assignment]
    await w._process(batch)
    assert ran == [7]
    assert [(j.target_id, j.state, j.attempts) for j in uow.jobs.rows] == [(8, "pending", 0)]
    # A deferred job is neither a completion nor a failure, and pauses nothing.
    assert (w.completed, w.failures, w.waiting_on) == (1, 0, None)
    assert told["retry"] == [(8, "tenant over budget")] and told["commits"] == [1]


async def test_a_gate_that_cannot_read_budgets_postpones_the_whole_batch(clock):
    uow = FakeUnitOfWork()

    async def gate(kind: str, batch: list[Job]) -> dict[int, Defer]:
        raise RuntimeError("database away")

    w, told = _worker(FakeDatabase(uow), gate=gate)
    w._slots = SimpleNamespace(release=lambda: None)  # type: ignore[assignment]
    await w._process(_claimed(uow, 7, 8))
    reason = "cannot read budgets: database away"
    assert sorted(told["retry"]) == [(7, reason), (8, reason)]
    assert [j.attempts for j in uow.jobs.rows] == [0, 0]
    assert w.waiting_on == reason


async def test_a_handler_that_raises_retries_every_job_it_was_given(clock):
    uow = FakeUnitOfWork()

    async def handler(batch: list[Job]) -> list[Outcome]:
        raise KeyError("bug")

    w, told = _worker(FakeDatabase(uow), handler)
    w._slots = SimpleNamespace(release=lambda: None)  # type: ignore[assignment]
    await w._process(_claimed(uow, 7, 8))
    assert [(j.state, j.attempts) for j in uow.jobs.rows] == [("pending", 1), ("pending", 1)]
    assert told["retry"][0] == (7, "internal error: KeyError('bug')")
    assert (w.completed, w.failures) == (0, 2)


async def test_a_write_that_fails_to_record_counts_as_a_failed_attempt(clock):
    uow = FakeUnitOfWork()

    def broken(_u: Any) -> None:
        raise ValueError("constraint")

    async def handler(batch: list[Job]) -> list[Outcome]:
        return [Outcome(j, write=broken) for j in batch]

    w, told = _worker(FakeDatabase(uow), handler)
    w._slots = SimpleNamespace(release=lambda: None)  # type: ignore[assignment]
    await w._process(_claimed(uow, 7))
    row = _row(uow, 7)
    assert (row.state, row.attempts) == ("pending", 1)
    assert row.last_error == "recording the outcome failed: ValueError('constraint')"
    assert (w.completed, w.failures) == (0, 1)


async def test_a_failed_batchs_llm_calls_are_counted_under_the_workers_stage(clock):
    uow = FakeUnitOfWork()

    async def handler(batch: list[Job]) -> list[Outcome]:
        ledger = llm_usage.current()
        assert ledger is not None
        ledger.add(LLMCall(ledger.stage, 1, "atlas", 10, 5, 0.5, "ok", 0.0))
        raise RuntimeError("after the call")

    w, _ = _worker(FakeDatabase(uow), handler, stage="extract")
    w._slots = SimpleNamespace(release=lambda: None)  # type: ignore[assignment]
    await w._process(_claimed(uow, 7))
    assert [(c.stage, c.prompt_tokens) for c in uow.usage.rows] == [("extract", 10)]


# ---- _note_dependency: a dependency that stays down pauses the worker ------------


async def test_a_batch_all_postponed_pauses_the_worker_and_every_waiting_job(clock):
    uow = FakeUnitOfWork()
    w, _ = _worker(FakeDatabase(uow))
    [job] = _claimed(uow, 7)
    uow.jobs.enqueue(KIND, [9], run_after=clock.now + 1.0)  # waiting, not in the batch
    await w._note_dependency([Outcome(job, error=Postpone("embedder away"))])
    assert w._paused_until == clock.now + CONFIG.postpone_delay
    assert w.waiting_on == "embedder away"
    waiting = _row(uow, 9)
    assert (waiting.run_after, waiting.last_error) == (w._paused_until, "embedder away")


async def test_each_failed_probe_doubles_the_pause_up_to_its_cap(clock):
    w, _ = _worker(FakeDatabase())
    down = [Outcome(Job(1, KIND, 7, 0), error=Postpone("down"))]
    pauses = []
    for _ in range(6):
        await w._note_dependency(down)
        pauses.append(w._paused_until - clock.now)
        clock.now = w._paused_until  # the next probe, once the pause is over
    assert pauses == [5.0, 10.0, 20.0, 40.0, 60.0, 60.0]


async def test_batches_in_flight_together_count_as_one_outage(clock):
    w, _ = _worker(FakeDatabase())
    down = [Outcome(Job(1, KIND, 7, 0), error=Postpone("down"))]
    await w._note_dependency(down)
    clock.now += 1.0  # a second batch reports while the pause runs
    await w._note_dependency(down)
    assert w._paused_until == clock.now - 1.0 + CONFIG.postpone_delay


async def test_a_batch_without_a_postponed_job_ends_the_outage(clock):
    w, _ = _worker(FakeDatabase())
    await w._note_dependency([Outcome(Job(1, KIND, 7, 0), error=Postpone("down"))])
    await w._note_dependency([Outcome(Job(2, KIND, 8, 0), error=Retry("bad answer"))])
    assert (w._down_streak, w._paused_until, w.waiting_on) == (0, 0.0, None)
    clock.now += 100.0
    await w._note_dependency([Outcome(Job(3, KIND, 9, 0), error=Postpone("down"))])
    assert w._paused_until == clock.now + CONFIG.postpone_delay  # from the start again


async def test_a_batch_partly_postponed_neither_pauses_nor_resumes(clock):
    w, _ = _worker(FakeDatabase())
    await w._note_dependency([Outcome(Job(1, KIND, 7, 0), error=Postpone("down"))])
    paused = w._paused_until
    mixed = [Outcome(Job(2, KIND, 8, 0)), Outcome(Job(3, KIND, 9, 0), error=Postpone("down"))]
    await w._note_dependency(mixed)
    assert (w._paused_until, w.waiting_on, w._down_streak) == (paused, "down", 1)


# ---- _idle_timeout: how long the worker waits when it claimed nothing -------------


async def test_a_worker_not_ready_polls_at_its_idle_poll(clock):
    w, _ = _worker(FakeDatabase(), ready=lambda: "no model configured")
    assert await w._idle_timeout() == CONFIG.idle_poll


async def test_a_paused_worker_waits_out_its_pause(clock):
    w, _ = _worker(FakeDatabase())
    w._paused_until = clock.now + 42.0
    assert await w._idle_timeout() == 42.0


async def test_an_idle_worker_wakes_when_its_next_job_falls_due(clock):
    uow = FakeUnitOfWork()
    w, _ = _worker(FakeDatabase(uow))
    assert await w._idle_timeout() == CONFIG.idle_poll  # nothing queued
    uow.jobs.enqueue(KIND, [7], run_after=clock.now + 2.0)
    assert await w._idle_timeout() == pytest.approx(2.0)
    uow.jobs.enqueue(KIND, [8], run_after=clock.now - 30.0)  # overdue: at once, not negative
    assert await w._idle_timeout() == 0.01
