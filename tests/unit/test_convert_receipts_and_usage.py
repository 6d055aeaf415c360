"""The smaller conversions, called directly: an erasure's receipt
(api/erasure_convert.py), a summary and the range UpdateSummary reads
(api/summary_convert.py), GetUsage's bucket and report and a tenant's budget
(api/usage_convert.py). What each keeps, what it defaults, what it refuses.

GetUsage's request checks are tests/unit/test_api_usage_request.py's; the
wiring of each RPC stays in its whole-server test (GetUsage's in
tests/e2e/api/test_get_usage.py, ForgetUser's receipts in
tests/e2e/api/test_forget_user_rights.py, summaries' in tests/e2e/service/).
"""

from __future__ import annotations

from dataclasses import fields

import pytest

from nexus_grpc.api import erasure_convert, summary_convert, usage_convert
from nexus_grpc.core.erasure import Counts, Erasure
from nexus_grpc.core.records import Summary
from nexus_grpc.domain.budgets import TenantSpend
from nexus_grpc.domain.usage_report import DAY, HOUR, Period, StageTotals, UsageReport
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2

BASE = 1_700_000_000


# Erasures --------------------------------------------------------------------


def test_a_receipt_carries_every_count_by_its_name():
    counted = Counts(**{f.name: i + 1 for i, f in enumerate(fields(Counts))})
    out = erasure_convert.counts(counted)
    assert {f.name: getattr(out, f.name) for f in fields(Counts)} == {
        f.name: i + 1 for i, f in enumerate(fields(Counts))
    }


def test_a_running_erasure_has_no_end_time_and_a_finished_one_has():
    running = Erasure(
        id=1, tenant="t", kind=memory_pb2.ERASURE_KIND_USER, state=memory_pb2.ERASURE_STATE_RUNNING,
        phase="episodes", user_id="alice", project_id=3, counts=Counts(episodes=2),
        planned=Counts(episodes=5), principal="ops", started_at=BASE, joined=True,
    )  # fmt: skip
    out = erasure_convert.erasure(running)
    assert (out.id, out.tenant, out.user_id, out.project_id) == (1, "t", "alice", 3)
    assert out.kind == memory_pb2.ERASURE_KIND_USER
    assert out.state == memory_pb2.ERASURE_STATE_RUNNING and out.phase == "episodes"
    assert (out.counts.episodes, out.planned.episodes) == (2, 5)
    assert out.joined and out.principal == "ops"
    assert out.start_time.seconds == BASE and not out.HasField("end_time")
    done = erasure_convert.erasure(Erasure(1, "t", 1, 2, "", finished_at=BASE + 9))
    assert done.end_time.seconds == BASE + 9


# Summaries -------------------------------------------------------------------


def test_a_summary_goes_out_with_its_range_and_times():
    s = Summary(
        id=1, session_id=2, project_id=3, content="c", first_episode_id=4, last_episode_id=6,
        episode_count=3, created_at=BASE, updated_at=BASE + 1,
    )  # fmt: skip
    out = summary_convert.summary(s)
    assert (out.session_id, out.project_id, out.content) == (2, 3, "c")
    assert (out.first_episode_id, out.last_episode_id, out.episode_count) == (4, 6, 3)
    assert (out.create_time.seconds, out.update_time.seconds) == (BASE, BASE + 1)
    never = summary_convert.summary(Summary(id=1, session_id=2, project_id=0, content="c"))
    assert not never.HasField("create_time") and not never.HasField("update_time")


def test_an_update_reads_only_the_summarys_range():
    message = summary_pb2.Summary(
        id=1, content="ignored here", first_episode_id=4, last_episode_id=6, episode_count=3
    )
    assert summary_convert.range_values(message) == {
        "first_episode_id": 4,
        "last_episode_id": 6,
        "episode_count": 3,
    }


# Usage -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bucket", "seconds"),
    [
        (memory_pb2.USAGE_BUCKET_UNSPECIFIED, DAY),
        (memory_pb2.USAGE_BUCKET_DAY, DAY),
        (memory_pb2.USAGE_BUCKET_HOUR, HOUR),
    ],
)
def test_an_unset_bucket_is_a_day(bucket, seconds):
    assert usage_convert.bucket_seconds(bucket) == seconds


@pytest.mark.parametrize("bucket", [3, -1])
def test_a_bucket_the_proto_does_not_define_is_refused(bucket):
    with pytest.raises(InvalidArgument) as err:
        usage_convert.bucket_seconds(bucket)
    assert err.value.field == "bucket"
    assert err.value.message == f"bucket {bucket} is not a UsageBucket"


def spend(**fields) -> TenantSpend:
    values = {"tenant": "t", "spent": 100, "limit": 100, "resets_at": BASE, **fields}
    return TenantSpend(**values)


def test_a_budget_shows_what_the_caller_may_see_and_whether_it_is_spent():
    users = (spend(user_id="alice", spent=40, limit=50), spend(user_id="bob", spent=60, limit=50))
    out = usage_convert.budget(spend(visible_spent=40, per_user=50, users=users))
    assert (out.tenant, out.llm_tokens_today, out.llm_tokens_per_day) == ("t", 40, 100)
    assert out.exhausted  # the tenant's own spend, not the part shown
    assert out.llm_tokens_per_day_per_user == 50
    assert out.resets_at.seconds == BASE
    assert [(u.user_id, u.llm_tokens_today, u.exhausted) for u in out.users] == [
        ("alice", 40, False),
        ("bob", 60, True),
    ]
    assert not usage_convert.budget(spend(limit=0)).exhausted  # no budget: never spent
    assert [b.tenant for b in usage_convert.budgets([spend(tenant="a"), spend(tenant="b")])] == [
        "a",
        "b",
    ]


def a_report(bucket_seconds: float) -> UsageReport:
    stage = StageTotals(
        "extraction", calls=2, prompt_tokens=30, completion_tokens=10, seconds=1.5,
        outcomes={"ok": 2}, estimated_calls=1,
    )  # fmt: skip
    day = Period(BASE, BASE + DAY, [stage], episodes=3, memories_formed=1, entities=4)
    return UsageReport(
        tenant="t", project_id=2, start=BASE, end=BASE + DAY, bucket_seconds=bucket_seconds,
        buckets=[day], total=day, budget=spend(), users=("alice",),
    )  # fmt: skip


def test_a_usage_report_says_its_bucket_and_carries_each_periods_stages():
    out = usage_convert.report(a_report(DAY))
    assert out.bucket == memory_pb2.USAGE_BUCKET_DAY
    assert (out.tenant, out.project_id, list(out.users)) == ("t", 2, ["alice"])
    assert (out.start_time.seconds, out.end_time.seconds) == (BASE, BASE + DAY)
    [period] = out.buckets
    assert (period.episodes, period.memories_formed, period.entities) == (3, 1, 4)
    [stage] = period.stages
    assert (stage.stage, stage.calls, stage.prompt_tokens, stage.completion_tokens) == (
        "extraction", 2, 30, 10,
    )  # fmt: skip
    assert (stage.seconds, dict(stage.outcomes), stage.estimated_calls) == (1.5, {"ok": 2}, 1)
    assert out.total == period and out.budget.tenant == "t"
    assert usage_convert.report(a_report(HOUR)).bucket == memory_pb2.USAGE_BUCKET_HOUR


def test_a_period_starting_at_the_epoch_keeps_its_start_time():
    out = usage_convert.period(Period(0.0, HOUR))
    assert out.HasField("start_time") and out.start_time.seconds == 0
