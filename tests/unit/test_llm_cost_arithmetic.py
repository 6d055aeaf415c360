"""The evaluations' LLM cost (nexus_grpc/evaluation/llm_cost.py): the
GetUsage reports of a run's projects summed per stage, the totals and the
per-episode figures, the window asked, and the report's lines. GetUsage is
answered by a scripted stub in-process (no server); what GetUsage itself
counts is tests/e2e/service/test_llm_usage.py's."""

from __future__ import annotations

from typing import Any

from nexus_grpc.evaluation.llm_cost import format_cost, project_cost
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2


def _stage(stage: str, calls: int, prompt: int, completion: int, seconds: float, **outcomes: int):
    return memory_pb2.StageUsage(
        stage=stage,
        calls=calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        seconds=seconds,
        outcomes=outcomes,
        estimated_calls=1,
    )


class ScriptedUsage:
    """GetUsage's answer per project, and the requests it was sent."""

    def __init__(self, answers: dict[int, list[memory_pb2.StageUsage]]) -> None:
        self.answers = answers
        self.requests: list[tuple[memory_pb2.GetUsageRequest, Any, Any]] = []

    async def GetUsage(self, request, *, timeout=None, metadata=None):  # noqa: N802, ASYNC109 - the RPC and its deadline
        self.requests.append((request, timeout, metadata))
        stages = self.answers[request.project_id]
        return memory_pb2.GetUsageResponse(total=memory_pb2.UsagePeriod(stages=stages))


STUB = {
    1: [
        _stage("extraction", 10, 1000, 200, 12.25, ok=9, cut_off=1),
        _stage("resolution", 2, 300, 40, 1.5, ok=2),
    ],
    2: [_stage("extraction", 5, 500, 100, 0.1004, ok=4, timeout=1)],
}


async def test_each_stage_sums_across_the_runs_projects():
    cost = await project_cost(ScriptedUsage(STUB), [1, 2], since=1_000_000.0, episodes=4)  # type: ignore[arg-type]
    extraction = cost["stages"]["extraction"]
    assert (extraction["calls"], extraction["prompt_tokens"], extraction["completion_tokens"]) == (
        15,
        1500,
        300,
    )
    assert extraction["seconds"] == 12.35  # rounded to the millisecond as it adds up
    assert extraction["outcomes"] == {"ok": 13, "cut_off": 1, "timeout": 1}
    assert extraction["estimated_calls"] == 2
    assert list(cost["stages"]) == ["extraction", "resolution"]  # by name


async def test_the_totals_and_per_episode_figures_cover_every_stage():
    cost = await project_cost(ScriptedUsage(STUB), [1, 2], since=1_000_000.0, episodes=4)  # type: ignore[arg-type]
    assert (cost["calls"], cost["tokens"]) == (17, 1500 + 300 + 300 + 40)
    assert cost["calls_per_episode"] == round(17 / 4, 4)
    assert cost["tokens_per_episode"] == round(2140 / 4, 1)


async def test_no_episodes_gives_zero_per_episode_not_a_division_by_zero():
    cost = await project_cost(ScriptedUsage(STUB), [2], since=1_000_000.0, episodes=0)  # type: ignore[arg-type]
    assert (cost["calls"], cost["calls_per_episode"], cost["tokens_per_episode"]) == (5, 0.0, 0.0)


async def test_the_window_opens_a_minute_before_the_run_and_asks_by_day():
    """A minute either side: the client's and the server's clocks may differ."""
    usage = ScriptedUsage(STUB)
    meta = (("authorization", "Bearer k"),)
    await project_cost(usage, [1, 2], since=1_000_000.0, episodes=1, timeout=3.0, metadata=meta)  # type: ignore[arg-type]
    assert [r.project_id for r, _, _ in usage.requests] == [1, 2]
    request, timeout, metadata = usage.requests[0]
    assert request.start_time.seconds == 1_000_000 - 60
    assert request.end_time.seconds > 1_000_000
    assert request.bucket == memory_pb2.USAGE_BUCKET_DAY
    assert (timeout, metadata) == (3.0, meta)


def test_the_report_gives_the_totals_then_a_line_per_stage_with_how_calls_ended():
    cost = {
        "calls": 17,
        "tokens": 2140,
        "calls_per_episode": 4.25,
        "tokens_per_episode": 535.0,
        "stages": {
            "extraction": {
                "calls": 15,
                "prompt_tokens": 1500,
                "completion_tokens": 300,
                "seconds": 12.35,
                "outcomes": {"timeout": 1, "ok": 13, "cut_off": 1},
            }
        },
    }
    assert format_cost(cost) == [
        "LLM (GetUsage): 17 calls, 2,140 tokens; per episode 4.25 calls, 535 tokens",
        "  extraction     15 calls     1,500 prompt      300 completion     12.3 s"
        " (cut_off 1, ok 13, timeout 1)",
    ]
