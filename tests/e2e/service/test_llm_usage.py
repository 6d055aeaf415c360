"""Every LLM call is accounted, durably, by stage, project and tenant, and
read back through GetUsage and /metrics: the Ollama stand-in's own token
counts are the figures, a retried job counts each attempt it made, and no
call is left unattributed."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from dataclasses import replace

from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from tests.graph_support import EMPTY, event_for, new_project, new_session, start_graph_harness
from tests.ollama_stub import OllamaStub, Reply
from tests.support import Harness, take, wait_until

BOTH_STORES = True
STUB_DEFAULT_REPLY = EMPTY
RESOLUTION_PROMPT = "Names and their candidates"
DECISION_PROMPT = "Kept memories:"


def _person(*names: str) -> dict:
    return {**EMPTY, "entities": [{"name": n, "type": "person", "notes": None} for n in names]}


def _memory(content: str, quote: str) -> dict:
    candidate = {"about": "user", "title": content[:30], "content": content,
                 "tier": "longterm", "quote": quote}  # fmt: skip
    return {**EMPTY, "ended": [], "memories": [candidate]}


async def _usage(h: Harness, **kw) -> memory_pb2.GetUsageResponse:
    return await h.memory.GetUsage(memory_pb2.GetUsageRequest(**kw))


def _stages(report: memory_pb2.GetUsageResponse) -> dict[str, memory_pb2.StageUsage]:
    return {s.stage: s for s in report.total.stages}


def _served(stub: OllamaStub) -> list:
    return stub.requests_to("/api/chat")


async def _say(h: Harness, stub: OllamaStub, session_id: int, user: str, reply: dict | None):
    if reply is not None:
        stub.add_rule(reply, contains=f"User message:\n{user}\n")
    ep = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session_id, user_message=user, ai_response="ok")
    )
    return ep, await event_for(h, ep.id, 20)


def _unattributed(h: Harness) -> list:
    calls, _, _ = h.app.llm.usage.snapshot()
    return [key for key in calls if key[0] == "unattributed"]


async def test_extraction_and_resolution_count_each_attempt_with_the_servers_tokens(gh, stub):
    p = await new_project(gh)
    s = await new_session(gh, p.id)
    # The first attempt meets a server error and is retried: two calls.
    stub.add_rule(Reply.error_status(503, "busy"), contains="Alex Kim and", times=1)
    await _say(gh, stub, s.id, "Alex Kim and Alex Chen joined.",
               _person("Alex Kim", "Alex Chen"))  # fmt: skip
    # The name question fails once (the name stays apart, pending), and the
    # resolve job asks again later: two resolution calls.
    stub.add_rule(Reply.error_status(500, "runner crashed"), contains=RESOLUTION_PROMPT, times=1)
    _, event = await _say(gh, stub, s.id, "Alex reviewed my slides.", _person("Alex"))
    [alex] = [e for e in event.entities if e.name == "Alex"]
    assert alex.resolution_pending

    def respond(endpoint: str, body: dict) -> Reply | None:
        prompt = "\n".join(m["content"] for m in body.get("messages", []))
        if RESOLUTION_PROMPT not in prompt:
            return None
        kim = re.search(r"id (\d+): Alex Kim \(", prompt)
        numbers = [int(n) for n in re.findall(r"^(\d+)\. \"", prompt, re.MULTILINE)]
        return Reply.of({"answers": [{"name": n, "entity_id": int(kim.group(1))} for n in numbers]})

    stub.responder = respond
    resolver = next(w for w in gh.app.workers if w.kind == "resolve:entity")
    resolver.config = replace(resolver.config, backoff_base=0.02, backoff_max=0.1)
    gh.app.signals.wake("resolve:entity")

    async def settled() -> memory_pb2.GetUsageResponse | None:
        report = await _usage(gh, project_id=p.id)
        found = _stages(report).get("resolution")
        # The second answer's call is counted when it returns; the merge it
        # decides commits after: wait for both.
        merged = report.total.entities == 2
        return report if found is not None and found.calls == 2 and merged else None

    # A bound, not a wait: it passes as soon as the merge commits. The question
    # asked again follows one that met an unreachable model; on a loaded CI
    # machine the two together once took over 20 s.
    report = await wait_until(settled, timeout=60)
    stages = _stages(report)
    assert dict(stages["extraction"].outcomes) == {"unreachable": 1, "ok": 2}
    assert dict(stages["resolution"].outcomes) == {"unreachable": 1, "ok": 1}
    served = _served(stub)
    assert sum(x.calls for x in stages.values()) == len(served) == 5
    # The figures are the server's own counts; the two failed calls count none.
    failed = [served[0], next(r for r in served if RESOLUTION_PROMPT in r.prompt_text())]
    assert sum(x.prompt_tokens for x in stages.values()) == sum(
        r.prompt_tokens for r in served
    ) - sum(r.prompt_tokens for r in failed)
    assert all(x.estimated_calls == 0 for x in stages.values())
    assert report.tenant == "default" and report.project_id == p.id
    # Alex, merged into Alex Kim, is no longer there to count.
    assert report.total.episodes == 2 and report.total.entities == 2
    assert _unattributed(gh) == []


async def test_a_dead_lettered_job_counts_every_attempt(gh, stub):
    p = await new_project(gh)
    s = await new_session(gh, p.id)
    stub.add_rule(Reply.of("not json at all"), contains="User message:\nhello\n", times=3)
    _, event = await _say(gh, stub, s.id, "hello", None)
    assert event.status == graph_pb2.EXTRACTION_STATUS_FAILED
    [extraction] = (await _usage(gh, project_id=p.id)).total.stages
    assert dict(extraction.outcomes) == {"bad_answer": 3}  # job_max_attempts
    assert extraction.completion_tokens > 0  # the answers were written all the same


async def test_formation_summaries_overviews_and_selection_are_accounted(gh, stub):
    p = await new_project(gh)
    s = await gh.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=p.id, user_id="al"))
    )
    first = "I'm vegetarian these days."
    await _formed(gh, stub, s.id, first, _memory("The user is vegetarian.", "I'm vegetarian"))

    def decide(endpoint: str, body: dict) -> Reply | None:
        prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
        if DECISION_PROMPT not in prompt:
            return None
        [kept] = re.findall(r"- id (\d+)", prompt)
        return Reply.of({"decisions": [{"candidate": 1, "action": "SUPERSEDE",
                                        "memory_id": int(kept), "reason": "changed"}]})  # fmt: skip

    stub.responder = decide
    await _formed(gh, stub, s.id, "I started eating fish again.",
                  _memory("The user eats fish.", "I started eating fish again"))  # fmt: skip
    stub.responder = None
    await gh.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=s.id))
    async for _ in gh.summary.SummarizeProject(
        summary_pb2.SummarizeProjectRequest(project_id=p.id)
    ):
        pass
    stub.add_rule(Reply.of({"selected": []}), contains="You choose which stored memories")
    picked = [
        x
        async for x in gh.memory.SelectMemories(
            memory_pb2.SelectMemoriesRequest(
                prompt="what does al eat?",
                scope=memory_pb2.MemoryScope(project_id=p.id, user_id="al"),
            )
        )
    ]
    assert picked == []  # the model chose none: no semantic fallback

    report = await _usage(gh, project_id=p.id)
    stages = _stages(report)
    assert {k: v.calls for k, v in stages.items()} == {
        "extraction": 2, "formation": 1, "summary": 1, "overview": 1, "selection": 1}  # fmt: skip
    assert all(dict(v.outcomes) == {"ok": v.calls} for v in stages.values())
    served = _served(stub)
    assert sum(v.prompt_tokens for v in stages.values()) == sum(r.prompt_tokens for r in served)
    assert report.total.memories_formed == 2 and report.total.episodes == 2
    # The tenant's figures are the project's here (one project, auth off).
    tenant = await _usage(gh)
    assert tenant.tenant == "default" and tenant.project_id == 0
    assert list(tenant.total.stages) == list(report.total.stages)
    assert tenant.total.memories_formed == 2 and tenant.total.episodes == 2
    assert _unattributed(gh) == []


async def _formed(h: Harness, stub: OllamaStub, session_id: int, user: str, reply: dict) -> None:
    stub.add_rule(reply, contains=f"User message:\n{user}\n")
    ep = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session_id, user_message=user, ai_response="ok")
    )
    call = h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(episode_id=ep.id))
    try:
        while True:
            [event] = await take(call, 1, 20)
            if event.HasField("memory_formation"):
                return
    finally:
        call.cancel()


async def test_buckets_split_the_window_by_utc_hour(gh, stub):
    p = await new_project(gh)
    s = await new_session(gh, p.id)
    await _say(gh, stub, s.id, "hello there", None)
    now = int(time.time())
    hour = now - now % 3600
    report = await _usage(
        gh,
        project_id=p.id,
        start_time=Timestamp(seconds=hour - 2 * 3600 + 60),
        end_time=Timestamp(seconds=now + 1),
        bucket=memory_pb2.USAGE_BUCKET_HOUR,
    )
    assert report.bucket == memory_pb2.USAGE_BUCKET_HOUR
    starts = [b.start_time.seconds for b in report.buckets]
    assert starts == [hour - 2 * 3600 + 60, hour - 3600, hour]
    assert [b.end_time.seconds for b in report.buckets][:2] == [hour - 3600, hour]
    assert [len(b.stages) for b in report.buckets] == [0, 0, 1]
    assert report.buckets[-1].episodes == 1
    day = await _usage(gh, project_id=p.id)
    assert day.bucket == memory_pb2.USAGE_BUCKET_DAY and len(day.buckets) == 8  # 7 days, cut
    assert day.end_time.seconds - day.start_time.seconds == 7 * 86_400


async def test_metrics_count_calls_tokens_and_seconds_by_stage_only(tmp_path, stub, store_settings):
    h = await start_graph_harness(
        tmp_path / "data", stub, metrics_listen="127.0.0.1:0", **store_settings
    )
    try:
        p = await new_project(h)
        s = await new_session(h, p.id)
        await _say(h, stub, s.id, "hello there", None)
        text = await asyncio.to_thread(
            lambda: urllib.request.urlopen(  # noqa: S310 - our own loopback endpoint
                f"http://127.0.0.1:{h.running.metrics.port}/metrics", timeout=5
            ).read().decode()
        )
    finally:
        await h.close()
    [request] = _served(stub)
    assert 'nexus_llm_calls_total{outcome="ok",stage="extraction"} 1.0' in text
    assert (
        f'nexus_llm_tokens_total{{direction="prompt",stage="extraction"}} '
        f"{float(request.prompt_tokens)}" in text
    )
    assert 'nexus_llm_tokens_total{direction="completion",stage="extraction"}' in text
    assert re.search(r'nexus_llm_seconds_total\{stage="extraction"\} \d', text)
    # No project or tenant label on any LLM series.
    llm_lines = [line for line in text.splitlines() if line.startswith("nexus_llm_")]
    assert llm_lines and not any("project" in line or "tenant" in line for line in llm_lines)
    assert json.dumps(llm_lines)  # plain text lines
