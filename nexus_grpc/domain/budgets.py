"""Each tenant's daily LLM token budget (docs/usage.md, "Budgets"), and
each user's share of it.

A budget is how many tokens (prompt and completion, every stage together) a
tenant's LLM work may spend in one UTC day: the keys file's ``"tenants"``
object names one per tenant, and ``--llm-tokens-per-day`` is every other
tenant's (0: none). A tenant's ``llm_tokens_per_day_per_user`` is how many
of them the work for any one of its users may spend (an episode's session's
user, the selecting user; work for no user, a project overview or a name's
question, is held by the tenant's budget only). What was spent is read from
the account (store/usage.py), so it holds across restarts and across the
instances that share one PostgreSQL database.

Past either, until the next 00:00 UTC (a user past their share waits while
the tenant's other users' work flows):

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

A budget raised or removed (the keys file or the flag, read at start) frees
the work it held at once: at start, every job a budget deferred whose tenant
and user may spend again is due now (``resume``), and its data stops saying
it waits.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.llm_usage import WorkOwner
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain.job_queue import Defer
from nexus_grpc.errors import ErrorInfo, QuotaViolation, ResourceExhausted

DAY = 86_400.0
#: The flag, and the keys file's field, a budget is set by.
QUOTA_ID = "llm-tokens-per-day"
#: The keys file's field a user's share of its tenant's day is set by.
USER_QUOTA_ID = "llm-tokens-per-day-per-user"
#: Users of a tenant one budget line names at most (a key that may act for
#: every user sees those who spent most).
MAX_USER_LINES = 100

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
    (0 in either: no budget); ``per_user``: each tenant's limit on the work
    for any one of its users (0 or absent: none)."""

    default: int = 0
    per_tenant: Mapping[str, int] = field(default_factory=dict)
    per_user: Mapping[str, int] = field(default_factory=dict)

    def limit(self, tenant: str) -> int:
        return self.per_tenant.get(tenant, self.default)

    def user_limit(self, tenant: str) -> int:
        return self.per_user.get(tenant, 0)

    @property
    def any(self) -> bool:
        """Whether any tenant has a budget (else nothing is ever read)."""
        return (
            self.default > 0
            or any(n > 0 for n in self.per_tenant.values())
            or any(n > 0 for n in self.per_user.values())
        )


@dataclass(frozen=True)
class TenantSpend:
    """A tenant's LLM spend today against its budget; with ``user_id``, the
    spend of the work for one of its users against the tenant's per-user
    limit."""

    tenant: str
    spent: int
    #: Tokens per day; 0: no budget.
    limit: int
    #: When today's spend starts again from zero (00:00 UTC).
    resets_at: float
    #: A user's share: ``spent`` and ``limit`` are the work for this user's.
    user_id: str = ""
    #: The tenant's limit per user (on a tenant's line); 0: none.
    per_user: int = 0
    #: Users' lines beside a tenant's: for a key that may act only for some
    #: users, theirs (and ``shown`` counts only their work); for one that
    #: may act for every user, those who spent most today.
    users: tuple[TenantSpend, ...] = ()
    #: What the caller may be told was spent, where it is not ``spent``: the
    #: work for its own users (the tenant's whole spend would tell one user
    #: about another's work).
    visible_spent: int | None = None

    @property
    def exhausted(self) -> bool:
        return 0 < self.limit <= self.spent

    @property
    def shown(self) -> int:
        return self.spent if self.visible_spent is None else self.visible_spent

    @property
    def quota_id(self) -> str:
        return USER_QUOTA_ID if self.user_id else QUOTA_ID

    def reason(self) -> str:
        if self.user_id:
            return (
                f"user {self.user_id!r} of tenant {self.tenant!r} has spent their share of"
                f" the tenant's LLM tokens for today ({self.spent:,} of {self.limit:,}"
                f" tokens, {USER_QUOTA_ID}); their LLM work resumes at {iso(self.resets_at)}"
            )
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
    return {
        t: TenantSpend(t, spent[t], policy.limit(t), next_day(at), per_user=policy.user_limit(t))
        for t in tenants
    }


def user_spend_of(
    uow: UnitOfWork, owners: Collection[WorkOwner], policy: BudgetPolicy, at: float
) -> dict[WorkOwner, TenantSpend]:
    """The spend since today's 00:00 UTC of the work for each (tenant, user),
    with the tenant's limit per user (work for no user is left out)."""
    by_tenant: dict[str, set[str]] = {}
    for o in owners:
        if o.user_id:
            by_tenant.setdefault(o.tenant, set()).add(o.user_id)
    out: dict[WorkOwner, TenantSpend] = {}
    for tenant, users in sorted(by_tenant.items()):
        spent = uow.usage.spent_by_users(day_start(at), tenant, sorted(users))
        for user in users:
            out[WorkOwner(tenant, user)] = TenantSpend(
                tenant, spent[user], policy.user_limit(tenant), next_day(at), user_id=user
            )
    return out


def as_seen(
    uow: UnitOfWork,
    spend: TenantSpend,
    users: frozenset[str] | None,
    policy: BudgetPolicy,
    at: float,
) -> TenantSpend:
    """A tenant's line as a caller may see it: with ``users`` (a key that may
    act only for them) its spend is only their work's, beside each one's
    line; for a key that may act for every user, the lines of the users who
    spent most today where the tenant limits its users."""
    if users is None:
        if not spend.per_user:
            return spend
        spent = uow.usage.spent_by_users(day_start(at), spend.tenant)
        most = sorted(spent, key=lambda u: (-spent[u], u))[:MAX_USER_LINES]
        lines = tuple(
            TenantSpend(spend.tenant, spent[u], spend.per_user, spend.resets_at, user_id=u)
            for u in most
        )
        return dataclasses.replace(spend, users=lines)
    theirs = user_spend_of(uow, [WorkOwner(spend.tenant, u) for u in users], policy, at)
    lines = tuple(theirs[k] for k in sorted(theirs))
    return dataclasses.replace(spend, users=lines, visible_spent=sum(line.spent for line in lines))


def held(
    kind: str,
    batch: Sequence[Job],
    owners: Mapping[int, WorkOwner],
    spends: Mapping[str, TenantSpend],
    user_spends: Mapping[WorkOwner, TenantSpend] | None = None,
) -> dict[int, Defer]:
    """The jobs of a batch whose tenant has spent its budget (or whose user
    their share of it), each deferred to the next day with a sweep that
    moves the tenant's (or that user's) other jobs of ``kind``."""
    out: dict[int, Defer] = {}
    for job in batch:
        owner = owners.get(job.target_id)
        if owner is None:
            continue
        spend = spends.get(owner.tenant)
        if spend is None or not spend.exhausted:
            spend = (user_spends or {}).get(owner)
        if spend is None or not spend.exhausted:
            continue
        message = f"{_WHAT.get(kind, kind)} waits: {spend.reason()}"
        sweep = functools.partial(
            _sweep,
            kind=kind,
            tenant=spend.tenant,
            user_id=spend.user_id,
            until=spend.resets_at,
            message=message,
        )
        out[job.id] = Defer(message, spend.resets_at, sweep)
    return out


def _sweep(
    uow: UnitOfWork, *, kind: str, tenant: str, user_id: str, until: float, message: str
) -> list[Job]:
    return uow.usage.defer_tenant_jobs(kind, tenant, until, message, user_id)


def _spends(
    uow: UnitOfWork, owners: Collection[WorkOwner], policy: BudgetPolicy, at: float
) -> tuple[dict[str, TenantSpend], dict[WorkOwner, TenantSpend]]:
    """The spends that can hold the work of ``owners``: their tenants' where a
    tenant has a budget, their users' where it limits its users."""
    limited = {o.tenant for o in owners if policy.limit(o.tenant) > 0}
    shared = [o for o in owners if o.user_id and policy.user_limit(o.tenant) > 0]
    return spend_of(uow, limited, policy, at), user_spend_of(uow, shared, policy, at)


#: What every budget's deferral says (the reasons name their quota), so that
#: the work a budget held is found again when it may run (``resume``).
DEFERRED_SAYS = f", {QUOTA_ID}"


class Budgets:
    """The budgets in force, and what they hold back."""

    def __init__(self, db: Database, policy: BudgetPolicy | None = None) -> None:
        self.db = db
        self.policy = policy or BudgetPolicy()

    def set_tenants(
        self, per_tenant: Mapping[str, int], per_user: Mapping[str, int] | None = None
    ) -> None:
        """The keys file's budgets (read at start, beside the keys)."""
        self.policy = dataclasses.replace(
            self.policy, per_tenant=dict(per_tenant), per_user=dict(per_user or {})
        )

    async def hold(self, kind: str, batch: list[Job]) -> Mapping[int, Defer]:
        """The LLM workers' gate: which jobs of a claimed batch must wait."""
        if not self.policy.any:
            return {}
        at = time.time()
        policy = self.policy

        def read(
            uow: UnitOfWork,
        ) -> tuple[dict[int, WorkOwner], dict[str, TenantSpend], dict[WorkOwner, TenantSpend]]:
            owners = uow.usage.job_owners(kind, [j.target_id for j in batch])
            return owners, *_spends(uow, set(owners.values()), policy, at)

        owners, spends, user_spends = await self.db.read_in_transaction(read)
        return held(kind, batch, owners, spends, user_spends)

    async def resume(
        self, kind: str, note: Callable[[UnitOfWork, Job, str], None] | None = None
    ) -> int:
        """The jobs of ``kind`` a budget deferred that may run now (their
        tenant's budget, or its users' share, raised or removed since) are
        due at once, and ``note`` clears what their data said (the worker's
        ``on_retry``, given ''). Returns how many. A sweep at a time, so
        SQLite's writer is never held for a whole backlog."""
        at = time.time()
        policy = self.policy

        def step(uow: UnitOfWork, after_id: int) -> tuple[int, int | None]:
            deferred = uow.usage.deferred_jobs(kind, DEFERRED_SAYS, at, after_id)
            if not deferred:
                return 0, None
            owners = uow.usage.job_owners(kind, [j.target_id for j in deferred])
            spends, user_spends = _spends(uow, set(owners.values()), policy, at)
            still = held(kind, deferred, owners, spends, user_spends)
            free = [j for j in deferred if j.id not in still]
            uow.usage.resume_jobs([j.id for j in free], at)
            if note is not None:
                for job in free:
                    note(uow, job, "")
            return len(free), deferred[-1].id

        # A look first: with nothing deferred (every start but one after a
        # spent budget) nothing is written, so a start commits nothing of its own.
        if not await self.db.read(lambda uow: uow.usage.deferred_jobs(kind, DEFERRED_SAYS, at, 0)):
            return 0
        resumed, after = 0, 0
        while True:
            n, last = await self.db.write(functools.partial(step, after_id=after))
            resumed += n
            if last is None:
                return resumed
            after = last

    async def spend(self, tenant: str) -> TenantSpend:
        at = time.time()
        policy = self.policy
        found = await self.db.read(lambda uow: spend_of(uow, [tenant], policy, at))
        return found[tenant]

    async def exhausted(self, tenant: str, user_id: str = "") -> TenantSpend | None:
        """The tenant's spend when its budget is spent, or the user's when
        their share is; None while the work for ``user_id`` may spend."""
        policy = self.policy
        owner = WorkOwner(tenant, user_id)
        if policy.limit(tenant) <= 0 and not (user_id and policy.user_limit(tenant) > 0):
            return None
        at = time.time()
        spends, user_spends = await self.db.read_in_transaction(
            lambda uow: _spends(uow, [owner], policy, at)
        )
        for spend in (spends.get(tenant), user_spends.get(owner)):
            if spend is not None and spend.exhausted:
                return spend
        return None

    async def require(self, tenant: str, what: str, user_id: str = "") -> None:
        """Refuse ``what`` (RESOURCE_EXHAUSTED) while the tenant's budget is
        spent, or the share of ``user_id``'s work."""
        spend = await self.exhausted(tenant, user_id)
        if spend is None:
            return
        if spend.user_id:
            subject = f"tenant:{spend.tenant}/user:{spend.user_id}"
            setting = f"{USER_QUOTA_ID} in the keys file"
        else:
            subject = f"tenant:{spend.tenant}"
            setting = f"{QUOTA_ID} in the keys file (or --{QUOTA_ID})"
        raise ResourceExhausted(
            f"{what} needs the LLM, and {spend.reason()}; ask again then, or raise the"
            f" tenant's {setting}",
            details=(
                QuotaViolation(
                    subject,
                    f"LLM tokens per UTC day: at most {spend.limit}; {spend.spent} spent today",
                    quota_id=spend.quota_id,
                    quota_value=spend.limit,
                ),
                ErrorInfo(
                    "LLM_BUDGET_SPENT",
                    {"tenant": spend.tenant, "resets_at": iso(spend.resets_at)}
                    | ({"user_id": spend.user_id} if spend.user_id else {}),
                ),
            ),
        )

    async def report(self, own: str) -> list[TenantSpend]:
        """Each tenant's spend today against its budget, as the caller may see
        it: its own tenant only, unless it sees every tenant (an admin key, or
        auth off): then every tenant with a budget of its own or a spend
        today, and its own. A key that may act only for some users is told
        only their work's spend (``as_seen``)."""
        at = time.time()
        policy = self.policy
        visible = tenancy.visible()
        users = tenancy.acting_users()

        def read(uow: UnitOfWork) -> list[TenantSpend]:
            if visible is not None:
                found = spend_of(uow, [visible], policy, at)
            else:
                names = set(uow.usage.spent(day_start(at))) | set(policy.per_tenant) | {own}
                found = spend_of(uow, names, policy, at)
            return [as_seen(uow, found[t], users, policy, at) for t in sorted(found)]

        return await self.db.read_in_transaction(read)
