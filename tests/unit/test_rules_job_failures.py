"""What a job's outcome does to it (domain/job_queue.py), on the fakes' job
queue: a failed attempt retried after a backoff that doubles, is capped and
jittered, dead-lettered after the last attempt or at once when a retry
would fail the same way; a postponed or deferred job waiting without
spending an attempt; a job whose work was queued again meanwhile gone. And
what an episode shows of its embedding job's outcome (domain/embedding_state.py).

Tenants' turns at a claim are tests/unit/test_job_turns.py. The workers that
raise these outcomes, with their real dependencies, are the integration
tier's (tests/integration/workers/).
"""

from __future__ import annotations

import time

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.models import JobState
from nexus_grpc.domain import embedding_state
from nexus_grpc.domain.job_queue import (
    Defer,
    GiveUp,
    JobQueue,
    Postpone,
    Retry,
    RetryPolicy,
    Verdict,
    finish,
    settle_failure,
)
from tests.fakes import FakeDatabase, FakeJob, FakeUnitOfWork

KIND = jobs.INDEX_EPISODE
POLICY = RetryPolicy(max_attempts=3, backoff_base=10.0, backoff_max=300.0, postpone_delay=5.0)


def _claimed(uow: FakeUnitOfWork, target: int = 1, run_after: float | None = None) -> jobs.Job:
    uow.jobs.enqueue(KIND, [target], run_after=run_after)
    (job,) = uow.jobs.claim(KIND, 1)
    return job


def _row(uow: FakeUnitOfWork, job: jobs.Job) -> FakeJob:
    (row,) = [j for j in uow.jobs.rows if j.id == job.id]
    return row


def test_a_failed_attempt_runs_again_after_its_backoff_and_counts():
    uow = FakeUnitOfWork()
    job = _claimed(uow)
    before = time.time()
    assert settle_failure(uow, job, Retry("the answer was not JSON"), POLICY) == Verdict.RETRYING
    row = _row(uow, job)
    assert (row.state, row.attempts, row.last_error) == ("pending", 1, "the answer was not JSON")
    # First attempt: base 10 s, jittered to between half and all of it.
    assert before + 5.0 <= row.run_after <= time.time() + 10.0


def test_the_last_attempt_dead_letters_the_job_with_its_error():
    uow = FakeUnitOfWork()
    job = _claimed(uow)
    last = jobs.Job(job.id, job.kind, job.target_id, attempts=POLICY.max_attempts - 1)
    assert settle_failure(uow, last, Retry("timeout"), POLICY) == Verdict.DEAD
    assert (_row(uow, job).state, _row(uow, job).last_error) == ("failed", "timeout")


def test_an_attempt_a_retry_would_repeat_is_dead_lettered_at_once():
    uow = FakeUnitOfWork()
    job = _claimed(uow)
    verdict = settle_failure(uow, job, GiveUp("cut off even with more room"), POLICY)
    assert verdict == Verdict.DEAD
    assert (_row(uow, job).state, _row(uow, job).attempts) == ("failed", 1)


def test_a_postponed_job_waits_without_spending_an_attempt():
    uow = FakeUnitOfWork()
    job = _claimed(uow)
    before = time.time()
    verdict = settle_failure(uow, job, Postpone("the embedder is down"), POLICY)
    assert verdict == Verdict.POSTPONED
    row = _row(uow, job)
    assert (row.state, row.attempts, row.last_error) == ("pending", 0, "the embedder is down")
    assert before + 5.0 <= row.run_after <= time.time() + 5.0


def test_a_deferred_job_waits_until_its_time_without_spending_an_attempt():
    uow = FakeUnitOfWork()
    job = _claimed(uow)
    until = time.time() + 3600
    assert settle_failure(uow, job, Defer("budget spent", until), POLICY) == Verdict.POSTPONED
    row = _row(uow, job)
    assert (row.state, row.attempts) == ("pending", 0)
    assert until - 1 <= row.run_after <= until + 1
    # A time already past: due at once.
    again = _claimed(uow, target=2)
    before = time.time()
    settle_failure(uow, again, Defer("budget spent", until=0.0), POLICY)
    assert before <= _row(uow, again).run_after <= time.time()


def test_a_job_whose_work_was_queued_again_goes_instead_of_failing():
    uow = FakeUnitOfWork()
    job = _claimed(uow)
    uow.jobs.enqueue(KIND, [job.target_id])  # the same work, queued while it ran
    assert settle_failure(uow, job, GiveUp("bad"), POLICY) == Verdict.GONE
    assert [(j.state, j.target_id) for j in uow.jobs.rows] == [("pending", job.target_id)]


def test_an_error_with_no_message_is_recorded_by_its_type():
    uow = FakeUnitOfWork()
    job = _claimed(uow)
    settle_failure(uow, job, Retry(), POLICY)
    assert _row(uow, job).last_error == "Retry"


@pytest.mark.parametrize(("attempts", "delay"), [(0, 10.0), (1, 20.0), (3, 80.0), (5, 300.0)])
def test_the_backoff_doubles_per_attempt_up_to_its_cap_and_is_jittered(attempts, delay):
    waits = [POLICY.backoff(attempts) for _ in range(50)]
    assert all(delay * 0.5 <= w <= delay for w in waits)
    assert len(set(waits)) > 1  # jitter: a burst's retries spread out


def test_a_finished_job_is_gone():
    uow = FakeUnitOfWork()
    job = _claimed(uow)
    other = _claimed(uow, target=2)
    finish(uow, [job.id])
    assert [j.id for j in uow.jobs.rows] == [other.id]


async def test_the_next_due_is_the_earliest_pending_job():
    uow = FakeUnitOfWork()
    queue = JobQueue(FakeDatabase(uow), KIND)
    assert await queue.next_due() is None
    uow.jobs.enqueue(KIND, [1], run_after=500.0)
    uow.jobs.enqueue(KIND, [2], run_after=200.0)
    uow.jobs.enqueue(jobs.INDEX_MEMORY, [3], run_after=100.0)  # another kind's
    assert await queue.next_due() == 200.0


async def test_waiting_all_holds_every_pending_job_with_the_reason_and_no_attempt():
    uow = FakeUnitOfWork()
    queue = JobQueue(FakeDatabase(uow), KIND)
    uow.jobs.enqueue(KIND, [1, 2], run_after=100.0)
    uow.jobs.enqueue(KIND, [3], run_after=9_000.0)  # already due later: kept
    await queue.wait_all("the embedder is not configured", 5_000.0)
    assert [(j.run_after, j.last_error, j.attempts) for j in uow.jobs.rows] == [
        (5_000.0, "the embedder is not configured", 0),
        (5_000.0, "the embedder is not configured", 0),
        (9_000.0, "the embedder is not configured", 0),
    ]


def test_an_episode_shows_its_embedding_jobs_outcome():
    uow = FakeUnitOfWork()
    session = uow.sessions.insert("s", "", 0, {}, "t1").id
    a, b, c = (uow.episodes.insert(session, t, "", {}, None).id for t in ("a", "b", "c"))
    embedding_state.retrying(uow, a, "timeout")
    embedding_state.failed(uow, b, "dimension mismatch")
    embedding_state.embedded(uow, [c])
    shown = {
        i: (uow.episodes.rows[i].embed_state, uow.episodes.rows[i].embed_error) for i in (a, b, c)
    }
    assert shown == {
        a: (JobState.PENDING, "timeout"),
        b: (JobState.FAILED, "dimension mismatch"),
        c: (JobState.DONE, ""),
    }
    embedding_state.embedded(uow, [a, b])  # a reindex that succeeds clears the error
    assert {uow.episodes.rows[i].embed_error for i in (a, b)} == {""}
