"""The durable job queue: claiming due work, and what a job's outcome does to it.

The queue is the store's ``jobs`` table (store/jobs.py), written in the
same transaction as the data a job concerns. The workers (workers/) run
jobs; what a failed attempt means is decided here, in the transaction that
records it:

- ``Retry``: the attempt failed (a malformed answer, a timeout, a 500). The
  job runs again after exponential backoff with jitter; after
  ``max_attempts`` it is dead-lettered (state 'failed', error kept).
- ``GiveUp``: repeating the attempt would fail the same way (an answer cut
  off even with more room): dead-lettered at once, with the reason.
- ``Postpone``: a dependency is down or not configured. The job waits
  without spending an attempt, so an outage never exhausts the backlog.
- ``Defer``: nothing failed, but this job may not run before a time (its
  tenant spent its LLM budget for the day, domain/budgets.py). It waits
  until then without spending an attempt, and, unlike ``Postpone``, says
  nothing about the dependency: the worker goes on with other jobs.

Tenants take turns (core/jobs.py): each claimer remembers whom it served
(``TenantTurns``) and a claim serves the least recent first.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from nexus_grpc.core import jobs
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database

#: A claimed job's lease on PostgreSQL (several instances claim from one table).
LEASE_SECONDS = jobs.LEASE_SECONDS


class Retry(Exception):
    """This attempt failed; try again later and count the attempt."""


class GiveUp(Retry):
    """This attempt failed in a way a retry repeats; dead-letter the job now."""


class Postpone(Exception):
    """A dependency is unavailable; wait without counting an attempt."""


class Defer(Exception):
    """Not this job's turn: it waits until ``until`` (seconds since the epoch)
    without spending an attempt. ``sweep``, run in the transaction that
    records it, moves the other jobs held for the same reason and returns
    them, so a backlog is not claimed one job at a time to be told the same."""

    def __init__(
        self,
        message: str,
        until: float,
        sweep: Callable[[UnitOfWork], Sequence[Job]] | None = None,
    ) -> None:
        super().__init__(message)
        self.until = until
        self.sweep = sweep


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 8
    backoff_base: float = 1.0
    backoff_max: float = 300.0
    postpone_delay: float = 5.0

    def backoff(self, attempts: int) -> float:
        delay = min(self.backoff_max, self.backoff_base * (2**attempts))
        return delay * random.uniform(0.5, 1.0)  # jitter: retries of a burst spread out


class Verdict(Enum):
    POSTPONED = "postponed"
    RETRYING = "retrying"
    DEAD = "dead"  # dead-lettered now
    GONE = "gone"  # its row was gone already: nothing to tell the data it concerns


def settle_failure(uow: UnitOfWork, job: Job, error: Exception, policy: RetryPolicy) -> Verdict:
    """Record a failed attempt of ``job`` (see the module docstring)."""
    message = str(error) or type(error).__name__
    if isinstance(error, Postpone):
        uow.jobs.postpone(job.id, message, policy.postpone_delay)
        return Verdict.POSTPONED
    if isinstance(error, Defer):
        uow.jobs.postpone(job.id, message, max(0.0, error.until - time.time()))
        return Verdict.POSTPONED
    if isinstance(error, GiveUp) or job.attempts + 1 >= policy.max_attempts:
        return Verdict.DEAD if uow.jobs.dead_letter(job.id, message) else Verdict.GONE
    uow.jobs.retry_later(job.id, message, policy.backoff(job.attempts))
    return Verdict.RETRYING


def finish(uow: UnitOfWork, job_ids: Sequence[int]) -> None:
    """The jobs are done: their rows go, with their results in the same commit."""
    uow.jobs.finish(list(job_ids))


class TenantTurns:
    """The tenants one claimer has served, least recently first: the memory
    of its round robin.

    It lives in the claimer, not in the database: a claim then writes nothing
    more than the jobs it takes, and instances sharing a PostgreSQL never
    wait on one another's turns. Each instance takes turns on its own, so a
    tenant's new job waits for at most one claim per instance; a restart
    forgets whom it served, and every tenant's next job is then as new.
    """

    def __init__(self, remember: int = 1024) -> None:
        # Past ``remember`` tenants, the least recently served are forgotten:
        # a forgotten tenant comes first again, where it was anyway.
        self.remember = remember
        self._served: OrderedDict[str, None] = OrderedDict()

    def order(self) -> list[str]:
        """Least recently served first."""
        return list(self._served)

    def served(self, tenants: Iterable[str]) -> None:
        """A claim took jobs of these tenants, in this order."""
        for tenant in tenants:
            self._served.pop(tenant, None)
            self._served[tenant] = None
        while len(self._served) > self.remember:
            self._served.popitem(last=False)


class JobQueue:
    """One kind's jobs."""

    def __init__(self, db: Database, kind: str) -> None:
        self.db = db
        self.kind = kind
        self.turns = TenantTurns()

    async def next_due(self) -> float | None:
        """When the earliest pending job falls due; None when none is pending."""
        return await self.db.read(lambda c: c.jobs.next_run_after(self.kind))

    async def claim(self, n: int, lease_seconds: float) -> list[Job]:
        """Up to ``n`` due jobs, tenants in turn (core/jobs.py)."""
        order = self.turns.order()
        batch = await self.db.write(
            lambda c: c.jobs.claim(self.kind, n, lease_seconds, served=order)
        )
        self.turns.served(job.tenant for job in batch)
        return batch

    async def renew(self, job_ids: Sequence[int], lease_seconds: float) -> None:
        await self.db.write(lambda c: c.jobs.renew(list(job_ids), lease_seconds))

    async def wait_all(self, reason: str, until: float) -> None:
        """Every pending job shows why it waits, in one statement, without
        spending attempts."""
        await self.db.write(lambda c: c.jobs.postpone_pending(self.kind, reason, until))
