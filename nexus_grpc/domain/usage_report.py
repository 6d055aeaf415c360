"""GetUsage: what the LLM cost a project or a tenant, and what it was for.

The account (store/usage.py) is read over [start, end) in UTC hour or day
buckets: per stage, calls, tokens both ways, seconds and outcomes; beside
them, the episodes stored, memories formation created and entities created
in each bucket; and the tenant's spend today against its budget.

Who sees what follows the tenants' rule (core/tenancy.py): a key reads its
own tenant, or a project of it (another tenant's project is NOT_FOUND, as a
missing one); only a key that sees every tenant (admin, or auth off) may
name another tenant.

And no user learns about another's work from it: a key that may act only
for some users reads only the usage of work done for them (their sessions'
extraction, formation and summaries, their selections; the episodes,
formed memories and entities that work made) and its budget line counts
only their spend (domain/budgets.as_seen). Project- and tenant-wide figures
are for keys that may act for every user: a formation call, or a memory
formed, would tell whether another user's episode formed a memory, and
whether they already held a similar one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from nexus_grpc.core import tenancy
from nexus_grpc.core.llm_usage import ActivityBucket, StageBucket
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.budgets import Budgets, TenantSpend, as_seen, spend_of
from nexus_grpc.errors import FieldViolation, InvalidArgument

HOUR = 3_600.0
DAY = 86_400.0
#: A window without a start reaches back this far from its end.
DEFAULT_WINDOW = 7 * DAY
#: Buckets one answer holds at most (a year of days, six weeks of hours).
MAX_BUCKETS = 1_000
MAX_TENANT_CHARS = 128


@dataclass(frozen=True)
class StageTotals:
    stage: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)
    estimated_calls: int = 0


@dataclass(frozen=True)
class Period:
    start: float
    end: float
    #: The stages that made calls, by name.
    stages: list[StageTotals] = field(default_factory=list)
    episodes: int = 0
    memories_formed: int = 0
    entities: int = 0


@dataclass(frozen=True)
class UsageReport:
    tenant: str
    project_id: int
    start: float
    end: float
    bucket_seconds: float
    buckets: list[Period]
    total: Period
    budget: TenantSpend
    #: The users whose work the figures count (the key may act only for
    #: them); empty: every user's work, and work for no user.
    users: tuple[str, ...] = ()


def window(
    start: float | None, end: float | None, bucket_seconds: float, at: float
) -> tuple[float, float]:
    """The window asked for, defaults filled in and checked."""
    end = at if end is None else end
    start = end - DEFAULT_WINDOW if start is None else start
    if start < 0 or end < 0:
        # Nothing was ever recorded before 1970, and bucket arithmetic
        # assumes positive times.
        bad = "start_time" if start < 0 else "end_time"
        raise InvalidArgument(f"{bad} must not be before 1970-01-01T00:00:00Z", field=bad)
    if start >= end:
        raise InvalidArgument(
            "start_time must be earlier than end_time",
            details=(
                FieldViolation("start_time", "start_time must be earlier than end_time"),
                FieldViolation("end_time", "end_time must be later than start_time"),
            ),
        )
    count = math.ceil(end / bucket_seconds) - math.floor(start / bucket_seconds)
    if count > MAX_BUCKETS:
        unit = "hour" if bucket_seconds == HOUR else "day"
        raise InvalidArgument(
            f"the window holds {count} {unit} buckets, more than the {MAX_BUCKETS} one answer"
            " holds: narrow start_time..end_time"
            + (" or ask for day buckets" if bucket_seconds == HOUR else ""),
            field="start_time",
        )
    return start, end


def periods(
    start: float,
    end: float,
    bucket_seconds: float,
    stages: Sequence[StageBucket],
    activity: Sequence[ActivityBucket],
) -> tuple[list[Period], Period]:
    """Every bucket of [start, end), oldest first (the first and last cut to
    the window), and the whole window's totals."""
    first = math.floor(start / bucket_seconds)
    last = math.ceil(end / bucket_seconds) - 1
    by_bucket: dict[int, list[StageBucket]] = {}
    for row in stages:
        by_bucket.setdefault(row.bucket, []).append(row)
    done = {a.bucket: a for a in activity}
    out = []
    for b in range(first, last + 1):
        a = done.get(b, ActivityBucket(b))
        out.append(
            Period(
                max(start, b * bucket_seconds),
                min(end, (b + 1) * bucket_seconds),
                _stages(by_bucket.get(b, [])),
                a.episodes,
                a.memories_formed,
                a.entities,
            )
        )
    total = Period(
        start,
        end,
        _stages(stages),
        sum(p.episodes for p in out),
        sum(p.memories_formed for p in out),
        sum(p.entities for p in out),
    )
    return out, total


def _stages(rows: Sequence[StageBucket]) -> list[StageTotals]:
    totals: dict[str, dict] = {}
    for r in rows:
        t = totals.setdefault(
            r.stage,
            {"calls": 0, "prompt": 0, "completion": 0, "seconds": 0.0, "out": {}, "est": 0},
        )
        t["calls"] += r.calls
        t["prompt"] += r.prompt_tokens
        t["completion"] += r.completion_tokens
        t["seconds"] += r.seconds
        t["out"][r.outcome] = t["out"].get(r.outcome, 0) + r.calls
        t["est"] += r.estimated_calls
    return [
        StageTotals(
            stage,
            t["calls"],
            t["prompt"],
            t["completion"],
            t["seconds"],
            dict(sorted(t["out"].items())),
            t["est"],
        )
        for stage, t in sorted(totals.items())
    ]


def _tenant_field(value: str) -> str:
    if value and (
        len(value) > MAX_TENANT_CHARS or not value.isprintable() or " " in value
    ):
        raise InvalidArgument(
            f"tenant {v.quoted(value)} is not a tenant's name: 1 to {MAX_TENANT_CHARS}"
            " printable characters with no spaces",
            field="tenant",
        )
    return value


class UsageReports:
    def __init__(self, db: Database, budgets: Budgets, default_tenant: str) -> None:
        self.db = db
        self.budgets = budgets
        self.default_tenant = default_tenant

    async def get(
        self,
        project_id: int,
        tenant: str,
        start: float | None,
        end: float | None,
        bucket_seconds: float,
    ) -> UsageReport:
        v.positive_id("project_id", project_id, required=False)
        _tenant_field(tenant)
        if project_id and tenant:
            raise InvalidArgument(
                "give project_id or tenant, not both: a project names its tenant",
                fields=("project_id", "tenant"),
            )
        at = time.time()
        start, end = window(start, end, bucket_seconds, at)
        # PERMISSION_DENIED for another tenant than a non-admin key's own.
        whose = tenancy.named(tenant, self.default_tenant) if not project_id else ""
        visible = tenancy.visible()
        acting = tenancy.acting_users()
        users = None if acting is None else sorted(acting)
        policy = self.budgets.policy

        def read(
            uow: UnitOfWork,
        ) -> tuple[str, list[StageBucket], list[ActivityBucket], TenantSpend]:
            if project_id:
                # Another tenant's project answers as a missing one.
                owner = uow.projects.get(project_id, visible).tenant
                scope: dict = {"project_id": project_id}
            else:
                owner = whose
                scope = {"tenant": whose}
            stages = uow.usage.stage_buckets(start, end, bucket_seconds, users=users, **scope)
            activity = uow.usage.activity_buckets(
                start, end, bucket_seconds, users=users, **scope
            )
            spend = spend_of(uow, [owner], policy, at)[owner]
            return owner, stages, activity, as_seen(uow, spend, acting, policy, at)

        owner, stages, activity, spend = await self.db.read_in_transaction(read)
        buckets, total = periods(start, end, bucket_seconds, stages, activity)
        return UsageReport(
            owner,
            project_id,
            start,
            end,
            bucket_seconds,
            buckets,
            total,
            spend,
            tuple(users or ()),
        )
