"""Each tenant's daily LLM token budget (docs/usage.md, "Budgets").

A budget is how many tokens (prompt and completion, every stage together) a
tenant's LLM work may spend in one UTC day: the keys file's ``"tenants"``
object names one per tenant, and ``--llm-tokens-per-day`` is every other
tenant's (0: none). What was spent is read from the account
(store/usage.py), so it holds across restarts and across the instances that
share one PostgreSQL database.

Past it, until the next 00:00 UTC:

- the tenant's LLM jobs wait (``hold``): deferred, not failed, no attempt
  spent, each saying why where its data shows its state (an episode's
  extraction or formation error); the rest of the tenant's backlog of that
  kind is moved with the first one found, so the worker goes straight on to
  other tenants' jobs instead of claiming the backlog one job at a time;
- ``SelectMemories`` ranks by semantic similarity and says why
  (``exhausted``); ``SummarizeSession`` and ``SummarizeProject`` are refused
  with RESOURCE_EXHAUSTED (``require``): an explicit request for model work
  gets an answer it can act on, not a wait;
- searches, reads and writes are unaffected.

The check comes before the work: a job or call that began under the budget
finishes, so a day's spend can pass the budget by what was in flight then (at
most one job per LLM worker slot, and the RPCs already running).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain.job_queue import Defer
from nexus_grpc.errors import ErrorInfo, QuotaViolation, ResourceExhausted

DAY = 86_400.0
#: The flag, and the keys file's field, a budget is set by.
QUOTA_ID = "llm-tokens-per-day"

# What each LLM job kind's deferral says it holds back.
_WHAT = {
    jobs.EXTRACT_EPISODE: "extraction",
    jobs.FORM_MEMORIES: "memory formation",
    jobs.SUMMARIZE_SESSION: "the session summary",
    jobs.RESOLVE_ENTITY: "entity resolution",
}


def day_start(at: float) -> float:
    """The start (00:00 UTC) of the day ``at`` falls in."""
    return at - (at % DAY)


def next_day(at: float) -> float:
    """The next 00:00 UTC after ``at``: when a spent budget is whole again."""
    return day_start(at) + DAY


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class BudgetPolicy:
    """Tokens per UTC day: ``per_tenant`` from the keys file, else ``default``
    (0 in either: no budget)."""

    default: int = 0
    per_tenant: Mapping[str, int] = field(default_factory=dict)

    def limit(self, tenant: str) -> int:
        return self.per_tenant.get(tenant, self.default)

    @property
    def any(self) -> bool:
        """Whether any tenant has a budget (else nothing is ever read)."""
        return self.default > 0 or any(n > 0 for n in self.per_tenant.values())


@dataclass(frozen=True)
class TenantSpend:
    """A tenant's LLM spend today against its budget."""

    tenant: str
    spent: int
    #: Tokens per day; 0: no budget.
    limit: int
    #: When today's spend starts again from zero (00:00 UTC).
    resets_at: float

    @property
    def exhausted(self) -> bool:
        return 0 < self.limit <= self.spent

    def reason(self) -> str:
        return (
            f"tenant {self.tenant!r} has spent its LLM token budget for today"
            f" ({self.spent:,} of {self.limit:,} tokens, {QUOTA_ID});"
            f" LLM work resumes at {iso(self.resets_at)}"
        )


def spend_of(
    uow: UnitOfWork, tenants: Collection[str], policy: BudgetPolicy, at: float
) -> dict[str, TenantSpend]:
    """Each tenant's spend since today's 00:00 UTC, with its budget."""
    spent = uow.usage.spent(day_start(at), sorted(tenants))
    return {t: TenantSpend(t, spent[t], policy.limit(t), next_day(at)) for t in tenants}


def held(
    kind: str,
    batch: Sequence[Job],
    owners: Mapping[int, str],
    spends: Mapping[str, TenantSpend],
) -> dict[int, Defer]:
    """The jobs of a batch whose tenant has spent its budget, each deferred to
    the next day with a sweep that moves the tenant's other jobs of ``kind``."""
    out: dict[int, Defer] = {}
    for job in batch:
        tenant = owners.get(job.target_id)
        spend = spends.get(tenant) if tenant is not None else None
        if spend is None or not spend.exhausted:
            continue
        message = f"{_WHAT.get(kind, kind)} waits: {spend.reason()}"
        sweep = functools.partial(
            _sweep, kind=kind, tenant=spend.tenant, until=spend.resets_at, message=message
        )
        out[job.id] = Defer(message, spend.resets_at, sweep)
    return out


def _sweep(uow: UnitOfWork, *, kind: str, tenant: str, until: float, message: str) -> list[Job]:
    return uow.usage.defer_tenant_jobs(kind, tenant, until, message)


class Budgets:
    """The budgets in force, and what they hold back."""

    def __init__(self, db: Database, policy: BudgetPolicy | None = None) -> None:
        self.db = db
        self.policy = policy or BudgetPolicy()

    def set_tenants(self, per_tenant: Mapping[str, int]) -> None:
        """The keys file's budgets (read at start, beside the keys)."""
        self.policy = dataclasses.replace(self.policy, per_tenant=dict(per_tenant))

    async def hold(self, kind: str, batch: list[Job]) -> Mapping[int, Defer]:
        """The LLM workers' gate: which jobs of a claimed batch must wait."""
        if not self.policy.any:
            return {}
        at = time.time()
        policy = self.policy

        def read(uow: UnitOfWork) -> tuple[dict[int, str], dict[str, TenantSpend]]:
            owners = uow.usage.job_tenants(kind, [j.target_id for j in batch])
            limited = {t for t in owners.values() if policy.limit(t) > 0}
            return owners, spend_of(uow, limited, policy, at)

        owners, spends = await self.db.read_in_transaction(read)
        return held(kind, batch, owners, spends)

    async def spend(self, tenant: str) -> TenantSpend:
        at = time.time()
        policy = self.policy
        found = await self.db.read(lambda uow: spend_of(uow, [tenant], policy, at))
        return found[tenant]

    async def exhausted(self, tenant: str) -> TenantSpend | None:
        """The tenant's spend when its budget is spent; None while it may spend."""
        if self.policy.limit(tenant) <= 0:
            return None
        spend = await self.spend(tenant)
        return spend if spend.exhausted else None

    async def require(self, tenant: str, what: str) -> None:
        """Refuse ``what`` (RESOURCE_EXHAUSTED) while the tenant's budget is spent."""
        spend = await self.exhausted(tenant)
        if spend is None:
            return
        raise ResourceExhausted(
            f"{what} needs the LLM, and {spend.reason()}; ask again then, or raise the"
            f" tenant's {QUOTA_ID} in the keys file (or --{QUOTA_ID})",
            details=(
                QuotaViolation(
                    f"tenant:{spend.tenant}",
                    f"LLM tokens per UTC day: at most {spend.limit}; {spend.spent} spent today",
                    quota_id=QUOTA_ID,
                    quota_value=spend.limit,
                ),
                ErrorInfo(
                    "LLM_BUDGET_SPENT",
                    {"tenant": spend.tenant, "resets_at": iso(spend.resets_at)},
                ),
            ),
        )

    async def report(self, own: str) -> list[TenantSpend]:
        """Each tenant's spend today against its budget, as the caller may see
        it: its own tenant only, unless it sees every tenant (an admin key, or
        auth off): then every tenant with a budget of its own or a spend
        today, and its own."""
        at = time.time()
        policy = self.policy
        visible = tenancy.visible()

        def read(uow: UnitOfWork) -> dict[str, TenantSpend]:
            if visible is not None:
                return spend_of(uow, [visible], policy, at)
            names = set(uow.usage.spent(day_start(at))) | set(policy.per_tenant) | {own}
            return spend_of(uow, names, policy, at)

        found = await self.db.read(read)
        return [found[t] for t in sorted(found)]
