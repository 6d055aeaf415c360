"""``nexus-grpc usage``'s own rules (ops/against_server/usage.py), without a server:
``--since`` read as seconds, the refusals made before a call, and the table
``format_report`` prints from a GetUsageResponse (the budget lines, the stage rows and
their total, estimated tokens, the per-episode figures, the bucket rows).

(The command against a real server, whose GetUsage sums the calls it stored:
tests/e2e/client/test_usage_cli.py.)"""

from __future__ import annotations

import pytest

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.usage import (
    UsageError,
    format_report,
    since_seconds,
    usage_table,
)
from tests.usage_calls import check_atlas_table


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("24h", 86_400), ("7d", 604_800),
                                              ("2w", 1_209_600)])  # fmt: skip
def test_since_reads_a_number_and_a_unit(text, seconds):
    assert since_seconds(text) == seconds


@pytest.mark.parametrize("text", ["7", "d", "0d", "-1d", "1y", "1.5d"])
def test_since_refuses_what_is_not_a_duration(text):
    with pytest.raises(UsageError, match="--since"):
        since_seconds(text)


async def test_what_the_command_line_gets_wrong_is_refused_before_any_call():
    # The client never opens its channel: both refusals come first.
    client = NexusClient("127.0.0.1:1")
    with pytest.raises(UsageError, match="--project or --tenant, not both"):
        await usage_table(client, project="atlas", tenant="x")
    with pytest.raises(UsageError, match="--since '1y'"):
        await usage_table(client, project="atlas", since="1y")
    assert client._channel is None


def _report(spent: int, budget: int, *, exhausted: bool = False, end: int = 0, **kw):
    kw = {"tenant": "acme", **kw}
    report = memory_pb2.GetUsageResponse(bucket=memory_pb2.USAGE_BUCKET_DAY, **kw)
    report.budget.llm_tokens_today = spent
    report.budget.llm_tokens_per_day = budget
    report.budget.exhausted = exhausted
    report.budget.resets_at.FromSeconds(1_765_152_000)  # 2025-12-08T00:00:00Z
    report.start_time.FromSeconds(end - 3600)
    report.end_time.FromSeconds(end)
    return report


def test_the_budget_line_says_what_is_spent_and_what_is_left():
    lines = format_report(_report(10, 50)).splitlines()
    assert lines[1] == "today: 10 of 50 tokens spent, 40 left (resets 2025-12-08 00:00 UTC)"
    spent = format_report(_report(53, 50, exhausted=True)).splitlines()
    assert spent[1] == (
        "today: the budget of 50 tokens is spent (53 spent); LLM work waits until it"
        " resets 2025-12-08 00:00 UTC"
    )


def test_a_users_key_is_told_the_figures_are_its_users_work_and_their_share():
    report = _report(30, 1000, users=["alice"])
    report.budget.llm_tokens_per_day_per_user = 100
    report.budget.users.add(user_id="alice", llm_tokens_today=30)
    lines = format_report(report).splitlines()
    assert lines[0].startswith("LLM usage of tenant 'acme', the work for 'alice', ")
    assert lines[1] == (
        "today: 30 tokens spent by this key's users' work, of the tenant's 1,000 a day"
        " (not spent; resets 2025-12-08 00:00 UTC)"
    )
    assert lines[2] == "  user 'alice': 30 of 100 tokens a user (70 left)"


def test_the_window_is_shown_to_the_second_so_its_end_is_not_read_as_a_day_before():
    # --since 1h run 41 s after midnight: the window ends on the new day,
    # whose row the day table prints.
    midnight = 1_765_065_600  # 2025-12-07T00:00:00Z
    header = format_report(_report(0, 0, end=midnight + 41)).splitlines()[0]
    assert header.endswith("2025-12-06 23:00:41 to 2025-12-07 00:00:41 UTC"), header


def _stages(period: memory_pb2.UsagePeriod) -> None:
    """What tests/e2e/client/test_usage_cli.py stores: two extractions (one timed
    out), a resolution whose tokens were estimated (the table both read is
    tests/usage_calls.py's check_atlas_table)."""
    period.stages.add(stage="extraction", calls=2, prompt_tokens=1200, completion_tokens=300,
                      seconds=122.5, outcomes={"ok": 1, "timeout": 1})  # fmt: skip
    period.stages.add(stage="resolution", calls=1, prompt_tokens=400, completion_tokens=20,
                      seconds=0.4, outcomes={"ok": 1}, estimated_calls=1)  # fmt: skip
    period.episodes = 2


def _project_report() -> memory_pb2.GetUsageResponse:
    report = _report(2900, 0, end=1_765_065_600 + 7200, project_id=1, tenant="default")
    _stages(report.total)
    return report


def test_the_table_shows_each_stage_and_what_it_cost_per_episode():
    table = format_report(_project_report(), "atlas")
    check_atlas_table(table)


def test_a_project_named_by_id_only_and_no_estimate_or_episode_say_no_more():
    report = _report(0, 0, project_id=4)
    report.total.stages.add(stage="selection", calls=1, prompt_tokens=900, completion_tokens=80)
    table = format_report(report)
    assert table.splitlines()[0].startswith("LLM usage of tenant 'acme', project 4, ")
    assert "~:" not in table
    assert table.splitlines()[-1] == "episodes 0, memories formed 0, entities written 0"


def test_busy_buckets_get_a_row_of_their_own_by_day_or_hour():
    report = _project_report()
    report.buckets.add().start_time.FromSeconds(1_765_065_600 - 86_400)  # an idle day
    busy = report.buckets.add()
    busy.start_time.FromSeconds(1_765_065_600)  # 2025-12-07
    _stages(busy)
    busy.memories_formed = 1
    lines = format_report(report).splitlines()
    assert lines[-2].split() == ["day", "calls", "tokens", "episodes", "memories", "entities"]
    assert lines[-1].split() == ["2025-12-07", "3", "1,920", "2", "1", "0"]
    report.bucket = memory_pb2.USAGE_BUCKET_HOUR
    hourly = format_report(report).splitlines()
    assert hourly[-2].split()[0] == "hour"
    assert hourly[-1].split()[:2] == ["2025-12-07", "00:00"]
