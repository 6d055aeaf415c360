"""``nexus-grpc usage``: GetUsage as a table in the terminal, for the key's
tenant or a project found by name."""

from __future__ import annotations

import asyncio
import time

import pytest

from nexus_grpc.cli import main
from nexus_grpc.client import NexusClient
from nexus_grpc.core.llm_usage import LLMCall
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.usage import (
    UsageError,
    format_report,
    since_seconds,
    usage_table,
)
from tests.support import start_harness


@pytest.fixture
async def seeded(tmp_path):
    h = await start_harness(tmp_path / "data")
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="atlas"))
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    for text in ("one", "two"):
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id, user_message=text, ai_response="ok"
            )
        )
    at = time.time()  # today, whenever the test runs
    calls = [
        LLMCall("extraction", project.id, "default", 1200, 300, 2.5, "ok", at),
        LLMCall("extraction", project.id, "default", 0, 0, 120.0, "timeout", at),
        LLMCall("resolution", project.id, "default", 400, 20, 0.4, "ok", at, estimated=True),
        LLMCall("selection", 0, "default", 900, 80, 0.9, "ok", at),
    ]
    await h.app.db.write(lambda uow: uow.usage.insert(calls))
    yield h
    await h.close()


async def test_the_table_shows_each_stage_and_what_it_cost_per_episode(seeded):
    async with NexusClient(seeded.target) as client:
        table = await usage_table(client, project="atlas", since="1d")
    lines = table.splitlines()
    assert lines[0].startswith("LLM usage of tenant 'default', project 'atlas' (1), ")
    assert lines[1] == "today: 2,900 tokens spent (no daily budget)"
    header, extraction, resolution, total = lines[3:7]
    assert header.split() == ["stage", "calls", "prompt", "tok", "compl.", "tok", "seconds",
                              "outcomes"]  # fmt: skip
    assert extraction.split() == ["extraction", "2", "1,200", "300", "122.5", "ok", "1,",
                                  "timeout", "1"]  # fmt: skip
    assert resolution.split()[:4] == ["resolution", "1", "400~", "20~"]
    assert total.split() == ["total", "3", "1,600", "320", "122.9"]
    assert "~: some calls' tokens are estimated" in table
    assert "episodes 2, memories formed 0, entities written 0; per episode: 1.50 calls," \
        " 960 tokens" in table
    # The tenant's figures include what no project holds (a selection).
    async with NexusClient(seeded.target) as client:
        tenant = await usage_table(client, since="2h", bucket="hour")
    assert "selection" in tenant and "LLM usage of tenant 'default', " in tenant


async def test_the_command_prints_the_table_and_refuses_what_it_cannot_read(seeded, capsys):
    ok = await asyncio.to_thread(
        main, ["usage", "--target", seeded.target, "--project", "atlas", "--since", "7d"]
    )
    out = capsys.readouterr()
    assert ok == 0 and "extraction" in out.out and out.err == ""
    missing = await asyncio.to_thread(
        main, ["usage", "--target", seeded.target, "--project", "nope"]
    )
    assert missing == 2
    assert "no project named 'nope'" in capsys.readouterr().err
    async with NexusClient(seeded.target) as client:
        with pytest.raises(UsageError, match="--project or --tenant, not both"):
            await usage_table(client, project="atlas", tenant="x")


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("24h", 86_400), ("7d", 604_800),
                                              ("2w", 1_209_600)])  # fmt: skip
def test_since_reads_a_number_and_a_unit(text, seconds):
    assert since_seconds(text) == seconds


@pytest.mark.parametrize("text", ["7", "d", "0d", "-1d", "1y", "1.5d"])
def test_since_refuses_what_is_not_a_duration(text):
    with pytest.raises(UsageError, match="--since"):
        since_seconds(text)


def _report(spent: int, budget: int, *, exhausted: bool = False, end: int = 0, **kw):
    report = memory_pb2.GetUsageResponse(tenant="acme", bucket=memory_pb2.USAGE_BUCKET_DAY, **kw)
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
