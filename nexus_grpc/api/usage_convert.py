"""GetUsage and the budgets of GetServiceStatus: proto ⇄ domain."""

from __future__ import annotations

from collections.abc import Sequence

from nexus_grpc.api import convert
from nexus_grpc.domain.budgets import TenantSpend
from nexus_grpc.domain.usage_report import DAY, HOUR, Period, UsageReport
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

_BUCKETS = {
    memory_pb2.USAGE_BUCKET_UNSPECIFIED: DAY,
    memory_pb2.USAGE_BUCKET_HOUR: HOUR,
    memory_pb2.USAGE_BUCKET_DAY: DAY,
}


def bucket_seconds(value: int) -> float:
    seconds = _BUCKETS.get(value)  # type: ignore[call-overload]
    if seconds is None:
        raise InvalidArgument(f"bucket {value} is not a UsageBucket", field="bucket")
    return seconds


def budget(spend: TenantSpend) -> memory_pb2.TenantBudget:
    return memory_pb2.TenantBudget(
        tenant=spend.tenant,
        llm_tokens_today=spend.shown,
        llm_tokens_per_day=spend.limit,
        exhausted=spend.exhausted,
        resets_at=convert.exact_timestamp(spend.resets_at),
        llm_tokens_per_day_per_user=spend.per_user,
        users=[
            memory_pb2.UserBudget(
                user_id=u.user_id, llm_tokens_today=u.spent, exhausted=u.exhausted
            )
            for u in spend.users
        ],
    )


def budgets(spends: Sequence[TenantSpend]) -> list[memory_pb2.TenantBudget]:
    return [budget(s) for s in spends]


def period(p: Period) -> memory_pb2.UsagePeriod:
    return memory_pb2.UsagePeriod(
        start_time=convert.exact_timestamp(p.start),
        end_time=convert.exact_timestamp(p.end),
        stages=[
            memory_pb2.StageUsage(
                stage=s.stage,
                calls=s.calls,
                prompt_tokens=s.prompt_tokens,
                completion_tokens=s.completion_tokens,
                seconds=s.seconds,
                outcomes=s.outcomes,
                estimated_calls=s.estimated_calls,
            )
            for s in p.stages
        ],
        episodes=p.episodes,
        memories_formed=p.memories_formed,
        entities=p.entities,
    )


def report(r: UsageReport) -> memory_pb2.GetUsageResponse:
    return memory_pb2.GetUsageResponse(
        tenant=r.tenant,
        project_id=r.project_id,
        start_time=convert.exact_timestamp(r.start),
        end_time=convert.exact_timestamp(r.end),
        bucket=(
            memory_pb2.USAGE_BUCKET_HOUR
            if r.bucket_seconds == HOUR
            else memory_pb2.USAGE_BUCKET_DAY
        ),
        buckets=[period(p) for p in r.buckets],
        total=period(r.total),
        budget=budget(r.budget),
        users=r.users,
    )
