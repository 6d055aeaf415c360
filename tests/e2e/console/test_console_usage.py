"""/status's LLM usage: GetUsage for the key's tenant, drawn as a chart with
its figures as tables, and carried by /status.json as data.

A real server over real gRPC whose LLM is the Ollama stand-in: two episodes
are extracted and a session summarised (three calls, two stages) in tenant
acme, which has a daily budget; the console is in-process (httpx's ASGI
transport), as in test_console_app.py.

The chart's geometry from a window's figures (tests/unit/test_console_usage_chart.py),
a window the page does not draw, refused before the server is asked, as a
page and as JSON (tests/unit/test_console_params.py, test_console_pages_routes.py),
and the window's whole UTC buckets asked of GetUsage (test_console_pages_reads.py)
are tested without a server; here, the page and its twin drawing a real
server's usage.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
import pytest_asyncio

from nexus_grpc.client import NexusClient
from nexus_grpc.console import page_data
from nexus_grpc.console.routes import build_app
from nexus_grpc.console.security import GuardSettings
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.graph_support import ALICE, EMPTY, start_graph_harness
from tests.ollama_stub import OllamaStub, Reply
from tests.support import wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEAM_KEY = "acme-usage-team-key-00000001"
ALICE_KEY = "acme-usage-alice-key-0000001"
CAROL_KEY = "acme-usage-carol-key-0000001"
GLOBEX_KEY = "globex-usage-key-00000000001"
BUDGET = 1_000_000
HOST = "127.0.0.1:8090"
MESSAGES = ("Alice leads the Atlas project.", "The Atlas launch is next week.")


class Setup:
    def __init__(self, harness, stub: OllamaStub, session_id: int) -> None:
        self.harness, self.stub, self.session_id = harness, stub, session_id


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("usage")
    keys = tmp / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "tenants": {"acme": {"llm_tokens_per_day": BUDGET}},
                "keys": [
                    {"key": TEAM_KEY, "name": "team", "users": "*", "tenant": "acme"},
                    {"key": ALICE_KEY, "name": "alice-app", "users": ["alice"], "tenant": "acme"},
                    {"key": CAROL_KEY, "name": "carol-app", "users": ["carol"], "tenant": "acme"},
                    {"key": GLOBEX_KEY, "name": "globex", "users": "*", "tenant": "globex"},
                ],
            }
        )
    )
    with OllamaStub(default=Reply.of(EMPTY)) as stub:
        stub.add_rule(ALICE, contains=f"User message:\n{MESSAGES[0]}\n")
        h = await start_graph_harness(tmp / "data", stub, auth_keys_file=str(keys))
        try:
            async with NexusClient(h.target, api_key=TEAM_KEY) as team:
                project = await team.create_project(project=memory_pb2.Project(name="Atlas"))
                session = await team.create_session(
                    session=memory_pb2.Session(project_id=project.id, user_id="alice")
                )
                for message in MESSAGES:
                    episode = await team.create_episode(
                        session_id=session.id, user_message=message, ai_response="Noted."
                    )
                    await _extracted(team, episode.id)
                await team.summarize_session(session_id=session.id)

                async def accounted() -> bool:
                    # The extraction's calls are written with its job's outcome.
                    stages = {s.stage: s.calls for s in (await team.get_usage()).total.stages}
                    return stages == {"extraction": 2, "summary": 1}

                await wait_until(accounted, timeout=20)
            yield Setup(h, stub, session.id)
        finally:
            await h.close()


async def _extracted(client: NexusClient, episode_id: int) -> None:
    stream = client.watch_extractions(episode_id=episode_id)
    try:
        async for _ in stream:  # the extraction's event: it has run
            return
    finally:
        stream.cancel()


class console:
    """An HTTP client of a console app acting with ``key``."""

    def __init__(self, setup: Setup, key: str) -> None:
        self.grpc = NexusClient(setup.harness.target, api_key=key)
        guard = GuardSettings(host="127.0.0.1", port=8090, loopback=True)
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=build_app(self.grpc, guard)),
            base_url=f"http://{HOST}",
        )

    async def __aenter__(self) -> tuple[httpx.AsyncClient, NexusClient]:
        return self.http, self.grpc

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()
        await self.grpc.close()


def _row(html: str, stage: str) -> str:
    found = re.search(rf'<tr data-stage="{stage}">(.*?)</tr>', html, re.S)
    assert found, f"no row for {stage}"
    return found.group(1)


def _cells(row: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]


async def test_status_shows_the_tenants_usage_as_getusage_reports_it(setup):
    async with console(setup, TEAM_KEY) as (http, grpc):
        view = (await http.get("/status.json")).json()
        page = await http.get("/status")
        report = await grpc.get_usage()  # the tenant's, the last 7 days
    assert page.status_code == 200, page.text[:300]
    usage = view["usage"]
    assert view["usage_window"] == "day"
    assert usage["tenant"] == "acme" and usage["project_id"] == 0
    assert usage["bucket"] == "hour" and len(usage["buckets"]) == 24
    # The window's figures are GetUsage's, stage by stage.
    expected = page_data.plain_all(report.total.stages)
    assert usage["total"]["stages"] == expected
    stages = {s["stage"]: s for s in usage["total"]["stages"]}
    assert {k: (s["calls"], s["outcomes"]) for k, s in stages.items()} == {
        "extraction": (2, {"ok": 2}),
        "summary": (1, {"ok": 1}),
    }
    # ...and the stand-in model's own counts.
    served = setup.stub.requests_to("/api/chat")
    assert len(served) == 3
    assert sum(s["prompt_tokens"] for s in stages.values()) == sum(r.prompt_tokens for r in served)
    # Every call was made within the hour: the last bucket holds them all.
    assert usage["buckets"][-1]["stages"] == expected
    assert all(not b["stages"] for b in usage["buckets"][:-1])
    spent = sum(s["prompt_tokens"] + s["completion_tokens"] for s in stages.values())
    assert usage["budget"]["llm_tokens_today"] == spent > 0
    assert usage["budget"]["llm_tokens_per_day"] == BUDGET and not usage["budget"]["exhausted"]

    html = page.text
    # The chart: one bar per hour, the last stacked from both stages.
    chart = re.search(r'<svg id="usage-chart".*?</svg>', html, re.S)
    assert chart, "no usage chart"
    bars = re.findall(r'<g class="bar" data-start="[^"]+" data-tokens="(\d+)">', chart.group(0))
    assert [int(t) for t in bars] == [0] * 23 + [spent]
    for name, stage in stages.items():
        drawn = rf'<rect class="s\d" data-stage="{name}" [^>]*height="([\d.]+)"'
        [height] = re.findall(drawn, html)
        assert float(height) > 0
        # The table beside it: a person reads the same figures.
        cells = _cells(_row(html, name))
        assert cells[:5] == [
            name, f"{stage['calls']:,}", f"{stage['prompt_tokens']:,}",
            f"{stage['completion_tokens']:,}", f"{stage['seconds']:.1f}",
        ]  # fmt: skip
        assert cells[5] == f"ok {stage['calls']}"
    budget = re.sub(r"<[^>]+>", "", re.search(r'<p id="budget">(.*?)</p>', html, re.S).group(1))
    assert f"Today: {spent:,} tokens of {BUDGET:,} a day ({BUDGET - spent:,} left" in budget
    # The chart as text: the hour with calls, its tokens per stage.
    hours = re.search(r'<table class="grid" id="usage-buckets">.*?</table>', html, re.S).group(0)
    [hour] = re.findall(r"<tr><td>.*?</tr>", hours, re.S)
    assert _cells(hour)[1:] == [
        "3",
        f"{spent:,}",
        *(f"{tokens(stages[n]):,}" for n in sorted(stages)),
    ]


def tokens(stage: dict) -> int:
    return stage["prompt_tokens"] + stage["completion_tokens"]


async def test_a_week_by_day_holds_the_same_calls(setup):
    async with console(setup, TEAM_KEY) as (http, _):
        day = (await http.get("/status.json")).json()["usage"]
        week = (await http.get("/status.json?window=week")).json()
        page = await http.get("/status?window=week")
    assert week["usage_window"] == "week"
    usage = week["usage"]
    assert usage["bucket"] == "day" and len(usage["buckets"]) == 7
    assert usage["start_time"].endswith("T00:00:00Z")  # whole UTC days
    assert usage["total"]["stages"] == day["total"]["stages"]
    assert usage["buckets"][-1]["stages"] == day["total"]["stages"]
    assert page.status_code == 200 and "Tokens per day" in page.text
    assert '<b aria-current="true">last 7 days, by day</b>' in page.text


async def test_a_user_key_sees_its_users_work_and_another_tenant_none_of_it(setup):
    async with console(setup, TEAM_KEY) as (http, _):
        team = (await http.get("/status.json")).json()["usage"]
    # A key that may act only for alice reads the figures of the work done
    # for her (counts, no content), as GetUsage answers it: here, all of it.
    async with console(setup, ALICE_KEY) as (http, _):
        alice = (await http.get("/status.json")).json()["usage"]
    assert alice["tenant"] == "acme" and alice["total"] == team["total"]
    assert alice["users"] == ["alice"] and team["users"] == []
    # Carol, of the same tenant, reads none of alice's work: not its calls,
    # its episodes, nor today's tokens.
    async with console(setup, CAROL_KEY) as (http, _):
        carol = (await http.get("/status.json")).json()["usage"]
        page = (await http.get("/status")).text
    assert carol["tenant"] == "acme" and carol["users"] == ["carol"]
    assert carol["total"]["stages"] == [] and carol["total"]["episodes"] == 0
    assert team["total"]["episodes"] == 2
    assert carol["budget"]["llm_tokens_today"] == 0 < team["budget"]["llm_tokens_today"]
    heading = re.search(r'<h2 id="usage-heading">(.*?)</h2>', page, re.S).group(1)
    assert heading == "LLM usage of tenant acme: the work for carol"
    assert 'id="usage-users"' in page and 'data-stage="extraction"' not in page
    # A key of another tenant sees its own tenant: nothing of acme's.
    async with console(setup, GLOBEX_KEY) as (http, _):
        view = (await http.get("/status.json")).json()
        page = (await http.get("/status")).text
    usage = view["usage"]
    assert view["tenant"] == usage["tenant"] == "globex"
    assert usage["total"]["stages"] == [] and usage["budget"]["llm_tokens_today"] == 0
    assert 'id="usage-chart"' not in page and 'data-stage="extraction"' not in page
    assert "No LLM calls in this window." in page
    assert "no daily budget" in page
