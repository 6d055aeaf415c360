"""The LLM calls a GetUsage report is read from, and what tenant a's report
holds: shared by the use case on the fakes
(tests/unit/test_activity_usage_reports.py) and the RPC on the wire
(tests/e2e/api/test_get_usage.py); and the table ``nexus-grpc usage`` prints
for project atlas, checked alike from a given report
(tests/unit/test_client_usage_table.py) and from a real server
(tests/e2e/client/test_usage_cli.py). Not a test module."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from nexus_grpc.core.llm_usage import LLMCall

#: Tenant a's stages: calls, prompt and completion tokens, outcomes.
A_TOTALS = {
    "extraction": (2, 100, 10, {"ok": 1, "timeout": 1}),
    "summary": (1, 40, 4, {"ok": 1}),
}
#: Tenant a's project pa alone: the summary ran in a session outside any project.
A_PROJECT_TOTALS = {"extraction": (2, 100, 10, {"ok": 1, "timeout": 1})}
#: Tenant a's seconds of extraction, and its tokens today.
A_EXTRACTION_SECONDS = 121.0
A_TOKENS_TODAY = 154


def usage_calls(pa: int, pb: int) -> list[LLMCall]:
    """The calls of tenant a (project ``pa``) and tenant b (project ``pb``), made
    now, so they count against the day's budgets too."""
    at = time.time()
    return [
        LLMCall("extraction", pa, "a", 100, 10, 1.0, "ok", at),
        LLMCall("extraction", pa, "a", 0, 0, 120.0, "timeout", at),
        LLMCall("summary", 0, "a", 40, 4, 0.5, "ok", at),  # a session outside any project
        LLMCall("extraction", pb, "b", 7000, 700, 3.0, "ok", at),
    ]


async def a_reads_its_tenant_and_project(
    read: Callable[..., Awaitable[Any]], totals: Callable[[Any], dict], pa: int
) -> Any:
    """Tenant a's key reads its tenant's report (``read()``), its project pa's
    (``read(project_id=pa)``) and its tenant named (``read(tenant="a")``), each
    with the totals of ``usage_calls``; ``totals`` turns a report into
    stage -> (calls, prompt, completion, outcomes). The tenant's report."""
    tenant = await read()
    assert (tenant.tenant, tenant.project_id) == ("a", 0)
    assert totals(tenant) == A_TOTALS
    [extraction, _] = tenant.total.stages
    assert extraction.seconds == pytest.approx(A_EXTRACTION_SECONDS)
    project = await read(project_id=pa)
    assert (project.tenant, project.project_id) == ("a", pa)
    assert totals(project) == A_PROJECT_TOTALS
    # Its own tenant, named, is its own to read.
    assert totals(await read(tenant="a")) == totals(tenant)
    return tenant


def check_atlas_table(table: str) -> None:
    """The table of project atlas (id 1, tenant default): two extractions (one
    timed out), a resolution whose tokens were estimated, over two episodes."""
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
        " 960 tokens" in table  # fmt: skip
