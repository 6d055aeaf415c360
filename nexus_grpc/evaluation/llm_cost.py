"""What an evaluation's projects cost the LLM, read back through GetUsage.

The evaluations count calls per episode from the extraction events; the
account (docs/usage.md) adds what the events cannot say: the tokens each
stage read and wrote, the calls the background jobs made later (a pending
name asked again, memory formation), and how the calls ended.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc

Metadata = Sequence[tuple[str, str]] | None


async def project_cost(
    memory: memory_grpc.MemoryServiceStub,
    project_ids: Sequence[int],
    since: float,
    episodes: int,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 - each RPC's deadline
    metadata: Metadata = None,
) -> dict[str, Any]:
    """Calls and tokens per stage of ``project_ids`` since ``since`` (their
    runs' start), summed, with the tokens per episode."""
    start = Timestamp()
    start.FromNanoseconds(int((since - 60) * 1e9))  # the clocks of client and server
    end = Timestamp()
    end.FromNanoseconds(int((time.time() + 60) * 1e9))
    stages: dict[str, dict[str, Any]] = {}
    for project_id in project_ids:
        report = await memory.GetUsage(
            memory_pb2.GetUsageRequest(
                project_id=project_id,
                start_time=start,
                end_time=end,
                bucket=memory_pb2.USAGE_BUCKET_DAY,
            ),
            timeout=timeout,
            metadata=metadata,
        )
        for s in report.total.stages:
            into = stages.setdefault(
                s.stage,
                {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0,
                 "outcomes": {}, "estimated_calls": 0},
            )  # fmt: skip
            into["calls"] += s.calls
            into["prompt_tokens"] += s.prompt_tokens
            into["completion_tokens"] += s.completion_tokens
            into["seconds"] = round(into["seconds"] + s.seconds, 3)
            into["estimated_calls"] += s.estimated_calls
            for outcome, n in s.outcomes.items():
                into["outcomes"][outcome] = into["outcomes"].get(outcome, 0) + n
    calls = sum(s["calls"] for s in stages.values())
    tokens = sum(s["prompt_tokens"] + s["completion_tokens"] for s in stages.values())
    return {
        "stages": dict(sorted(stages.items())),
        "calls": calls,
        "tokens": tokens,
        "calls_per_episode": round(calls / episodes, 4) if episodes else 0.0,
        "tokens_per_episode": round(tokens / episodes, 1) if episodes else 0.0,
    }


def format_cost(cost: dict[str, Any]) -> list[str]:
    """The cost as report lines: the totals, then one line per stage."""
    lines = [
        f"LLM (GetUsage): {cost['calls']} calls, {cost['tokens']:,} tokens;"
        f" per episode {cost['calls_per_episode']:.2f} calls, {cost['tokens_per_episode']:,.0f}"
        " tokens"
    ]
    for stage, s in cost["stages"].items():
        ended = ", ".join(f"{k} {v}" for k, v in sorted(s["outcomes"].items()))
        lines.append(
            f"  {stage:<11} {s['calls']:>5} calls {s['prompt_tokens']:>9,} prompt"
            f" {s['completion_tokens']:>8,} completion {s['seconds']:>8.1f} s ({ended})"
        )
    return lines
