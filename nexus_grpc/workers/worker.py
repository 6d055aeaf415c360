"""A durable job worker: claim due jobs, run them, record the outcome.

Every outcome is written to SQLite in one transaction with the job's own
row: a finished job's results and the deletion of its row commit together,
so a crash can repeat work (handlers are idempotent) but never lose it.

What a failed attempt does to its job (``Retry``, ``GiveUp``, ``Postpone``,
``Defer``) is the queue's rule, ``domain.job_queue``; this module runs jobs,
bounds their concurrency, pauses the whole worker while a dependency stays
down, and tells the data a job concerns (``on_dead``, ``on_retry``).

A worker whose jobs call the LLM names its ``stage``: each batch runs inside
a ledger (core/llm_usage.py), and the calls it made that no handler wrote
itself are written in the transaction that records the batch's outcomes,
success or failure, so every attempt made is counted once. Its ``gate``
(a tenant's budget, domain/budgets.py) may hold jobs of a batch back
(``Defer``) without pausing the worker for anyone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from nexus_grpc.core import llm_usage
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.llm_usage import LLMCall
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import job_queue
from nexus_grpc.domain.job_queue import Defer as Defer
from nexus_grpc.domain.job_queue import GiveUp as GiveUp
from nexus_grpc.domain.job_queue import Postpone as Postpone
from nexus_grpc.domain.job_queue import Retry as Retry
from nexus_grpc.domain.job_queue import Verdict
from nexus_grpc.errors import Unavailable

log = logging.getLogger(__name__)
WriteFn = Callable[[UnitOfWork], None]


@dataclass
class Outcome:
    job: Job
    write: WriteFn | None = None
    error: Exception | None = None


Handler = Callable[[list[Job]], Awaitable[list[Outcome]]]
DeadHook = Callable[[UnitOfWork, Job, str], None]
#: The jobs of a claimed batch that may not run now, and why.
Gate = Callable[[str, list[Job]], Awaitable[Mapping[int, Defer]]]


@dataclass(frozen=True)
class WorkerConfig:
    batch_size: int = 1
    concurrency: int = 1
    max_attempts: int = 8
    backoff_base: float = 1.0
    backoff_max: float = 300.0
    postpone_delay: float = 5.0
    # While a dependency stays down, the whole worker pauses, doubling up to
    # this, and then probes with one batch: a backlog of N jobs must not cost
    # N failed calls and 2N commits every postpone_delay.
    postpone_max: float = 60.0
    idle_poll: float = 5.0
    # On PostgreSQL: a claimed job's lease, renewed every third of it while it runs.
    lease_seconds: float = job_queue.LEASE_SECONDS


class JobWorker:
    def __init__(
        self,
        db: Database,
        signals: JobSignals,
        kind: str,
        handler: Handler,
        config: WorkerConfig,
        *,
        on_dead: DeadHook | None = None,
        on_retry: DeadHook | None = None,
        ready: Callable[[], str | None] | None = None,
        after_commit: Callable[[], None] | None = None,
        stage: str | None = None,
        gate: Gate | None = None,
    ) -> None:
        self.db = db
        self.queue = job_queue.JobQueue(db, kind)
        self.signals = signals
        self.kind = kind
        self.handler = handler
        self.config = config
        self.on_dead = on_dead
        self.on_retry = on_retry
        # Returns a reason when the worker must not run (e.g. no Ollama configured).
        self.ready = ready or (lambda: None)
        # Runs once a batch's outcomes are committed (e.g. wake what reads them).
        self.after_commit = after_commit
        # The LLM stage its handler's calls count under (None: it makes none).
        self.stage = stage
        self.gate = gate
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(config.concurrency)
        self._main: asyncio.Task[None] | None = None
        self.failures = 0
        self.completed = 0
        self._down_streak = 0
        self._paused_until = 0.0
        # Why the worker is waiting on a dependency, for health detail; None when not.
        self.waiting_on: str | None = None

    def start(self) -> None:
        self._main = asyncio.create_task(self._run(), name=f"worker:{self.kind}")

    async def stop(self) -> None:
        if self._main is not None:
            self._main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._main
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _run(self) -> None:
        event = self.signals.event(self.kind)
        while True:
            event.clear()
            claimed = 0
            try:
                if self.ready() is None and time.time() >= self._paused_until:
                    claimed = await self._claim_and_dispatch()
                if claimed:
                    continue
                timeout = await self._idle_timeout()
            except Unavailable as exc:
                # The database is away (PostgreSQL restarting, a failover): the
                # jobs wait in it, so try again after a poll instead of dying.
                log.warning("%s: cannot claim jobs: %s", self.kind, exc)
                timeout = self.config.idle_poll
            # asyncio.timeout, not wait_for: on 3.11, wait_for swallows a cancel
            # that lands as the event is set, and stop() would then hang.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await event.wait()

    async def _idle_timeout(self) -> float:
        if self.ready() is not None:
            return self.config.idle_poll
        pause = self._paused_until - time.time()
        if pause > 0:
            return pause
        nxt = await self.queue.next_due()
        if nxt is None:
            return self.config.idle_poll
        loop_now = time.time()
        return max(0.01, min(self.config.idle_poll, nxt - loop_now))

    async def _claim_and_dispatch(self) -> int:
        await self._slots.acquire()
        try:
            batch = await self.queue.claim(self.config.batch_size, self.config.lease_seconds)
        except BaseException:
            self._slots.release()
            raise
        if not batch:
            self._slots.release()
            return 0
        task = asyncio.create_task(self._process(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return len(batch)

    async def _renew_leases(self, batch: list[Job]) -> None:
        """Keep this batch's leases while it runs, so no other instance on a
        shared PostgreSQL takes jobs that are alive here (store/jobs.py)."""
        ids = [j.id for j in batch]
        while True:
            await asyncio.sleep(self.config.lease_seconds / 3)
            try:
                await self.queue.renew(ids, self.config.lease_seconds)
            except Exception as exc:  # the database is away: the next beat tries again
                log.warning("%s: renewing %d job leases failed: %s", self.kind, len(ids), exc)

    async def _handle(self, batch: list[Job]) -> list[Outcome]:
        leases = (
            asyncio.create_task(self._renew_leases(batch))
            if getattr(self.db, "dialect", None) == "postgresql"
            else None
        )
        try:
            return await self.handler(batch)
        finally:
            if leases is not None:
                leases.cancel()

    async def _held(self, batch: list[Job]) -> Mapping[int, Defer]:
        if self.gate is None:
            return {}
        return await self.gate(self.kind, batch)

    async def _run_batch(self, batch: list[Job]) -> list[Outcome]:
        try:
            held = await self._held(batch)
        except Exception as exc:  # the database is away: wait for it
            log.warning("%s: cannot tell which jobs may run: %s", self.kind, exc)
            return [Outcome(j, error=Postpone(f"cannot read budgets: {exc}")) for j in batch]
        outcomes = [Outcome(j, error=held[j.id]) for j in batch if j.id in held]
        run = [j for j in batch if j.id not in held]
        if not run:
            return outcomes
        try:
            outcomes += await self._handle(run)
        except Exception as exc:  # a handler bug must not kill the worker
            log.exception("%s handler failed on %d jobs", self.kind, len(run))
            outcomes += [Outcome(j, error=Retry(f"internal error: {exc!r}")) for j in run]
        return outcomes

    async def _process(self, batch: list[Job]) -> None:
        try:
            calls: list[LLMCall] = []
            if self.stage is None:
                outcomes = await self._run_batch(batch)
            else:
                with llm_usage.ledger(self.stage) as ledger:
                    try:
                        outcomes = await self._run_batch(batch)
                    finally:
                        calls = ledger.unwritten()
            try:
                await self.db.write(lambda c: self._record(c, outcomes, calls))
            except Exception as exc:
                # Recording failed (e.g. the result's write raised): count it as a
                # failed attempt, so the job is retried and finally dead-lettered
                # instead of staying 'running' until a restart, or looping forever.
                # The calls were made all the same: they are written with it.
                log.exception("%s: recording outcomes failed", self.kind)
                failed = Retry(f"recording the outcome failed: {exc!r}")
                outcomes = [Outcome(j, error=failed) for j in batch]
                await self.db.write(lambda c: self._record(c, outcomes, calls))
            ran = [o for o in outcomes if not isinstance(o.error, Defer)]
            self.completed += sum(1 for o in ran if o.error is None)
            self.failures += sum(1 for o in ran if o.error is not None)
            await self._note_dependency(ran)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: could not record outcomes; the jobs rerun at restart", self.kind)
        finally:
            self._slots.release()
            self.signals.wake(self.kind)
        if self.after_commit is not None:
            # Also after a failure: a spurious wake-up costs readers one empty read.
            self.after_commit()

    @property
    def policy(self) -> job_queue.RetryPolicy:
        """The retry policy of the worker's config, read when a job fails: a
        config replaced while the worker runs (the tests' fast backoff) is
        what its next failure follows, with no second copy to go stale."""
        c = self.config
        return job_queue.RetryPolicy(
            max_attempts=c.max_attempts,
            backoff_base=c.backoff_base,
            backoff_max=c.backoff_max,
            postpone_delay=c.postpone_delay,
        )

    async def _note_dependency(self, outcomes: Sequence[Outcome]) -> None:
        if not outcomes:
            return  # every job was deferred: nothing was learnt about the dependency
        postponed = [o.error for o in outcomes if isinstance(o.error, Postpone)]
        if outcomes and len(postponed) == len(outcomes):
            now = time.time()
            # Back off further only when a probe after the last pause failed:
            # batches that were in flight together report one outage, not several.
            if now >= self._paused_until:
                self._down_streak += 1
                pause = self.config.postpone_delay * 2 ** (self._down_streak - 1)
                self._paused_until = now + min(self.config.postpone_max, pause)
            self.waiting_on = str(postponed[-1])
            # Every waiting job shows why, in one statement, without spending attempts.
            await self.queue.wait_all(self.waiting_on or "", self._paused_until)
        elif not postponed:
            self._down_streak = 0
            self._paused_until = 0.0
            self.waiting_on = None

    def _record(
        self, uow: UnitOfWork, outcomes: Sequence[Outcome], calls: Sequence[LLMCall] = ()
    ) -> None:
        uow.usage.insert(calls)
        done = []
        for o in outcomes:
            if o.error is None:
                if o.write is not None:
                    o.write(uow)
                done.append(o.job.id)
                continue
            message = str(o.error) or type(o.error).__name__
            verdict = job_queue.settle_failure(uow, o.job, o.error, self.policy)
            if verdict is Verdict.DEAD:
                log.warning("%s job %d dead-lettered: %s", self.kind, o.job.id, message)
                if self.on_dead:
                    self.on_dead(uow, o.job, message)
            elif verdict is not Verdict.GONE and self.on_retry:
                # A postponed job spent no attempt, but its target shows why it
                # waits too (say, on GetEpisode while Ollama is unreachable).
                self.on_retry(uow, o.job, message)
            if isinstance(o.error, Defer) and o.error.sweep is not None:
                # The jobs held for the same reason wait with it, and say so.
                for other in o.error.sweep(uow):
                    if self.on_retry:
                        self.on_retry(uow, other, message)
        job_queue.finish(uow, done)
