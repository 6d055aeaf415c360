"""``nexus-grpc eval graph``: does the graph stay one and stay current?

Stores a scripted set (nexus_grpc/evaluation/graph_set.py; the format is in
docs/graph-eval.md) through the public gRPC API, with whatever LLM the server
has, and compares the graph it ends with to the one a careful reader expects:

1. Each project of the set becomes a new project (its name made unique per
   run, so a set can run twice on one server). Episodes go in file order, one
   at a time, and each one's ``ExtractionEvent`` is awaited
   (``WatchExtractions``) before the next is sent, so resolution meets the
   graph as it grows. An episode marked ``import`` goes through
   ``ImportEpisodes`` with its ``occur_time``: an exchange stored late.
2. Once every episode is DONE or FAILED, the server's resolution queue is
   let drain (names kept apart are asked about again).
3. Then it reads, as any client would: the merges (``ListMerges``), the
   entities, their aliases and their facts now and at the probe times
   (``ListRelationships`` with ``as_of``), and scores them
   (graph_score.py says how).

The report: B-cubed precision, recall and F1 of entity resolution, duplicate
entities, false merges, current-fact accuracy, as-of accuracy, LLM calls per
episode, merges the LLM made and entities still waiting on it, per project
and over the set, with every miss spelt out.
"""

# The ``timeout`` parameters are gRPC deadlines handed to the calls, not asyncio timeouts.
# ruff: noqa: ASYNC109

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO, TypeVar

import grpc
import grpc.aio
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client.connection import bearer_metadata, open_channel
from nexus_grpc.evaluation import graph_score as score
from nexus_grpc.evaluation import llm_cost
from nexus_grpc.evaluation.eval_errors import DataError, EvalError
from nexus_grpc.evaluation.graph_set import Episode, GraphSet, Project, load
from nexus_grpc.evaluation.recall import Progress
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc

Metadata = tuple[tuple[str, str], ...]
T = TypeVar("T")
PAGE = 100
# The queues whose work changes the graph after an episode's event: an
# extraction retried, a name kept apart asked about again.
SETTLING_QUEUES = ("extract:episode", "resolve:entity")
#: GetServiceStatus's names for the LLM dependency (its --llm-api).
LLM_DEPENDENCIES = ("ollama", "openai")
DONE, FAILED, TIMED_OUT = "DONE", "FAILED", "TIMED_OUT"
_STATUS = {graph_pb2.EXTRACTION_STATUS_DONE: DONE, graph_pb2.EXTRACTION_STATUS_FAILED: FAILED}
_ALIAS_METHODS = {
    graph_pb2.RESOLUTION_METHOD_NEW: "new",
    graph_pb2.RESOLUTION_METHOD_EXACT: "exact",
    graph_pb2.RESOLUTION_METHOD_CONTAINMENT: "containment",
    graph_pb2.RESOLUTION_METHOD_SHINGLE: "shingle",
    graph_pb2.RESOLUTION_METHOD_LLM: "llm",
    graph_pb2.RESOLUTION_METHOD_MERGE: "merge",
    graph_pb2.RESOLUTION_METHOD_MANUAL: "manual",
}
# Item: (project index, episode index in the project, mention index).
Item = tuple[int, int, int]


@dataclass
class Outcome:
    """What the service said about one episode."""

    episode: Episode
    episode_id: int = 0
    status: str = TIMED_OUT
    error: str = ""
    llm_calls: int = 0
    entities: list[score.SeenEntity] = field(default_factory=list)


@dataclass
class ProjectRun:
    project: Project
    project_id: int = 0
    outcomes: list[Outcome] = field(default_factory=list)


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(round(seconds * 1e9)))
    return ts


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _seen(e: graph_pb2.Entity) -> score.SeenEntity:
    return score.SeenEntity(e.id, e.name, e.type, tuple(e.aliases))


class _Client:
    """The calls the evaluation makes, with its deadline and credentials."""

    def __init__(self, channel: grpc.aio.Channel, timeout: float, metadata: Metadata) -> None:
        self.memory = memory_grpc.MemoryServiceStub(channel)
        self.graph = graph_grpc.GraphServiceStub(channel)
        self.timeout = timeout
        self.metadata = metadata

    async def pages(
        self, call: Callable[..., Any], request: Any, items: Callable[[Any], Sequence[T]]
    ) -> list[T]:
        out: list[T] = []
        while True:
            reply = await call(request, timeout=self.timeout, metadata=self.metadata)
            out += items(reply)
            if not reply.next_page_token:
                return out
            request.page_token = reply.next_page_token

    async def store(self, episode: Episode, session_id: int, request_id: str) -> int:
        request = memory_pb2.CreateEpisodeRequest(
            session_id=session_id,
            user_message=episode.user,
            ai_response=episode.assistant,
            request_id=request_id,
            occur_time=timestamp(episode.occur_time),
        )
        if not episode.imported:
            made = await self.memory.CreateEpisode(
                request, timeout=self.timeout, metadata=self.metadata
            )
            return int(made.id)
        done = await self.memory.ImportEpisodes(
            iter([memory_pb2.ImportEpisodesRequest(episode=request)]),
            timeout=self.timeout,
            metadata=self.metadata,
        )
        if done.failed or not done.episode_ids or not done.episode_ids[0]:
            why = done.errors[0].message if done.errors else "no episode id came back"
            raise EvalError(f"{episode.where}: ImportEpisodes refused it: {why}")
        return int(done.episode_ids[0])

    async def event(self, episode_id: int, limit: float) -> graph_pb2.ExtractionEvent | None:
        """The episode's first extraction event (the log replays a past one),
        or None when none came within ``limit`` seconds."""
        call = self.graph.WatchExtractions(
            graph_pb2.WatchExtractionsRequest(episode_id=episode_id),
            timeout=limit,
            metadata=self.metadata,
        )
        try:
            message = await call.read()
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return None
            raise
        finally:
            call.cancel()
        return None if message is grpc.aio.EOF else message

    async def status(self) -> memory_pb2.ServiceStatus:
        return await self.memory.GetServiceStatus(
            memory_pb2.GetServiceStatusRequest(), timeout=self.timeout, metadata=self.metadata
        )

    async def queues(self) -> dict[str, int]:
        return {q.kind: int(q.pending) for q in (await self.status()).queues}


# Storing -----------------------------------------------------------------------------


async def _store_project(
    client: _Client,
    run: ProjectRun,
    run_id: str,
    episode_timeout: float,
    progress: Progress,
    counter: list[int],
    total: int,
) -> None:
    project = run.project
    made = await client.memory.CreateProject(
        memory_pb2.CreateProjectRequest(
            project=memory_pb2.Project(
                name=f"graph-eval {project.name} {run_id}",
                single_valued_labels=list(project.single_valued_labels or ()),
            )
        ),
        timeout=client.timeout,
        metadata=client.metadata,
    )
    run.project_id = made.id
    for s, session in enumerate(project.sessions):
        created = await client.memory.CreateSession(
            memory_pb2.CreateSessionRequest(
                session=memory_pb2.Session(name=session.name, project_id=made.id)
            ),
            timeout=client.timeout,
            metadata=client.metadata,
        )
        for i, episode in enumerate(session.episodes):
            outcome = Outcome(episode)
            outcome.episode_id = await client.store(
                episode, created.id, f"graph-eval-{run_id}-{episode.project}-{s}-{i}"
            )
            # One at a time: the next episode is resolved against the graph
            # this one left.
            _take(outcome, await client.event(outcome.episode_id, episode_timeout))
            run.outcomes.append(outcome)
            if outcome.status == TIMED_OUT:
                await _check_serving(client, episode, episode_timeout)
            counter[0] += 1
            progress(f"storing: {counter[0]}/{total} episodes ({project.name})")


async def _check_serving(client: _Client, episode: Episode, waited: float) -> None:
    """After an episode got no event: a server that cannot extract (no LLM,
    or one that does not answer) stops the run now rather than after every
    episode's timeout."""
    status = await client.status()
    # A server without an LLM is healthy (its LLM is off), but extracts nothing.
    llm_off = [d for d in status.dependencies if d.off and d.name in LLM_DEPENDENCIES]
    if status.state != "SERVING" or llm_off:
        down = "; ".join(
            f"{d.name}: {d.detail}" for d in status.dependencies if not d.ok or d in llm_off
        )
        state = status.state if status.state != "SERVING" else "SERVING without an LLM"
        raise EvalError(
            f"{episode.where}: no extraction event within {waited:.0f}s, and the server is"
            f" {state} ({down or 'no reason given'})"
        )


def _take(outcome: Outcome, event: graph_pb2.ExtractionEvent | None) -> None:
    if event is None:
        outcome.status, outcome.error = TIMED_OUT, "no extraction event within the episode timeout"
        return
    outcome.status = _STATUS.get(event.status, f"status {event.status}")
    outcome.error = event.error
    outcome.llm_calls = event.llm_calls
    outcome.entities = [_seen(e) for e in event.entities]


async def _settle(client: _Client, limit: float, progress: Progress) -> dict[str, int]:
    """Waits (at most ``limit`` s) until no extraction or resolution job is
    pending; returns what is still pending then."""
    end = time.monotonic() + limit
    while True:
        queues = await client.queues()
        pending = {k: queues.get(k, 0) for k in SETTLING_QUEUES if queues.get(k, 0)}
        if not pending or time.monotonic() > end:
            return pending
        progress("settling: " + ", ".join(f"{n} {k}" for k, n in pending.items()))
        await asyncio.sleep(0.25)  # polling a remote server: there is no event to wait on


# Reading the graph back --------------------------------------------------------------


@dataclass
class GraphState:
    """A project's graph as the service shows it after the run."""

    entities: dict[int, graph_pb2.Entity]
    merged_into: dict[int, int]
    #: Merges resolution made once the LLM answered: (target, sources, reason).
    llm_merges: list[tuple[int, tuple[int, ...], str]]
    alias_methods: Counter[str]


async def _read_graph(client: _Client, project_id: int) -> GraphState:
    entities = await client.pages(
        client.graph.ListEntities,
        graph_pb2.ListEntitiesRequest(project_id=project_id, page_size=PAGE),
        lambda r: list(r.entities),
    )
    merges = await client.pages(
        client.graph.ListMerges,
        graph_pb2.ListMergesRequest(project_id=project_id, page_size=PAGE),
        lambda r: list(r.merges),
    )
    merged_into: dict[int, int] = {}
    llm_merges = []
    for m in merges:  # oldest first
        if m.HasField("undo_time"):
            continue
        if m.method == graph_pb2.MERGE_METHOD_LLM:
            llm_merges.append((m.target_id, tuple(m.source_ids), m.reason))
        for source in m.source_ids:
            merged_into[source] = m.target_id
    methods: Counter[str] = Counter()
    for e in entities:
        aliases = await client.pages(
            client.graph.ListEntityAliases,
            graph_pb2.ListEntityAliasesRequest(entity_id=e.id, page_size=PAGE),
            lambda r: list(r.aliases),
        )
        methods.update(_ALIAS_METHODS.get(a.method, "unspecified") for a in aliases)
    return GraphState({e.id: e for e in entities}, merged_into, llm_merges, methods)


async def _facts(client: _Client, entity_id: int, as_of: float | None = None) -> list[Any]:
    request = graph_pb2.ListRelationshipsRequest(entity_id=entity_id, page_size=PAGE)
    if as_of is not None:
        request.as_of.CopyFrom(timestamp(as_of))
    return await client.pages(
        client.graph.ListRelationships, request, lambda r: list(r.relationships)
    )


# Scoring -------------------------------------------------------------------------------


@dataclass
class Scored:
    """One project's (or the set's) figures and misses."""

    gold: dict[Item, str] = field(default_factory=dict)
    predicted: dict[Item, int] = field(default_factory=dict)
    located: Counter[str] = field(default_factory=Counter)
    current: tuple[int, int] = (0, 0)
    as_of: tuple[int, int] = (0, 0)
    wrong_current: list[score.Mismatch] = field(default_factory=list)
    wrong_as_of: list[score.Mismatch] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)
    unlocated: list[str] = field(default_factory=list)


async def _score_project(client: _Client, run: ProjectRun) -> tuple[Scored, GraphState]:
    project = run.project
    state = await _read_graph(client, run.project_id)
    out = Scored()
    for e in run.outcomes:
        for entity in e.entities:
            out.names.setdefault(entity.id, entity.name)
    out.names.update({i: e.name for i, e in state.entities.items()})
    for n, outcome in enumerate(run.outcomes):
        for m, mention in enumerate(outcome.episode.entities):
            item = (outcome.episode.project, n, m)
            out.gold[item] = mention.key
            found, how = score.locate(mention.name, mention.type, outcome.entities)
            out.located[how] += 1
            if found is None:
                out.unlocated.append(
                    f"{outcome.episode.where}: {mention.name!r} ({mention.type}) {how}"
                    f" in the {outcome.status} event"
                )
                continue
            out.predicted[item] = score.follow(found, state.merged_into)
    gold_of = score.majority(out.gold, out.predicted)

    def name(entity_id: int) -> str:
        return str(gold_of.get(entity_id) or f"?{out.names.get(entity_id, f'#{entity_id}')}")

    actual: dict[tuple[str, str], set[str]] = {}
    for entity_id in state.entities:
        for r in await _facts(client, entity_id):
            actual.setdefault((name(r.from_id), r.label), set()).add(name(r.to_id))
    correct, groups, wrong = score.compare_groups(project.current(), actual)
    out.current, out.wrong_current = (correct, groups), wrong

    right = 0
    for probe in project.probes:
        holders = [i for i, key in gold_of.items() if key == probe.entity and i in state.entities]
        got: set[str] = set()
        for entity_id in holders:
            got |= {
                name(r.to_id)
                for r in await _facts(client, entity_id, probe.time)
                if r.label == probe.label and r.from_id == entity_id
            }
        if frozenset(got) == probe.expect:
            right += 1
        else:
            out.wrong_as_of.append(
                score.Mismatch(
                    probe.entity,
                    probe.label,
                    tuple(sorted(probe.expect)),
                    tuple(sorted(got)),
                    probe.time,
                )
            )
    out.as_of = (right, len(project.probes))
    return out, state


def _figures(
    scored: Scored, outcomes: Sequence[Outcome], states: Sequence[GraphState]
) -> dict[str, Any]:
    b3 = score.bcubed(scored.gold, scored.predicted)
    done = [o for o in outcomes if o.status == DONE]
    calls = sum(o.llm_calls for o in done)
    methods: Counter[str] = Counter()
    for s in states:
        methods.update(s.alias_methods)
    return {
        "episodes": len(outcomes),
        "done": len(done),
        "failed": sum(1 for o in outcomes if o.status == FAILED),
        "timed_out": sum(1 for o in outcomes if o.status == TIMED_OUT),
        "imported": sum(1 for o in outcomes if o.episode.imported),
        "mentions": len(scored.gold),
        "mentions_located": scored.located[score.FOUND],
        "mentions_missing": scored.located[score.MISSING],
        "mentions_ambiguous": scored.located[score.AMBIGUOUS],
        "gold_entities": len(set(scored.gold.values())),
        "predicted_entities": len(set(scored.predicted.values())),
        "bcubed_precision": round(b3.precision, 4),
        "bcubed_recall": round(b3.recall, 4),
        "bcubed_f1": round(b3.f1, 4),
        "duplicate_entities": score.duplicate_entities(scored.gold, scored.predicted),
        "false_merges": score.false_merges(scored.gold, scored.predicted),
        "current_facts": {
            "correct": scored.current[0],
            "groups": scored.current[1],
            "accuracy": round(score.ratio(*scored.current), 4),
        },
        "as_of": {
            "correct": scored.as_of[0],
            "probes": scored.as_of[1],
            "accuracy": round(score.ratio(*scored.as_of), 4),
        },
        "llm_calls": calls,
        "llm_calls_per_episode": round(calls / len(done), 4) if done else 0.0,
        "llm_merges": sum(len(s.llm_merges) for s in states),
        "resolution_pending": sum(
            1 for s in states for e in s.entities.values() if e.resolution_pending
        ),
        "entities": sum(len(s.entities) for s in states),
        "aliases_by_method": dict(sorted(methods.items())),
    }


def _misses(run: ProjectRun, scored: Scored, state: GraphState) -> dict[str, Any]:
    def label(entity_id: int) -> str:
        return f"{scored.names.get(entity_id, '?')} (#{entity_id})"

    def mismatch(m: score.Mismatch) -> dict[str, Any]:
        out: dict[str, Any] = {
            "subject": m.subject,
            "label": m.label,
            "expected": list(m.expected),
            "got": list(m.actual),
        }
        if m.time is not None:
            out["time"] = iso(m.time)
        return out

    return {
        "split": {
            key: sorted(label(i) for i in ids)
            for key, ids in score.split_clusters(scored.gold, scored.predicted).items()
        },
        "merged": {
            label(entity_id): sorted(keys)
            for entity_id, keys in score.merged_entities(scored.gold, scored.predicted).items()
        },
        "current_facts": [mismatch(m) for m in scored.wrong_current],
        "as_of": [mismatch(m) for m in scored.wrong_as_of],
        "episodes": [
            {"where": o.episode.where, "status": o.status, "error": o.error}
            for o in run.outcomes
            if o.status != DONE
        ],
        "unlocated_mentions": scored.unlocated,
        "llm_merges": [
            f"{', '.join(label(i) for i in sources)} into {label(target)}: {reason}"
            for target, sources, reason in state.llm_merges
        ],
        "pending_entities": sorted(
            label(e.id) for e in state.entities.values() if e.resolution_pending
        ),
    }


# The run ---------------------------------------------------------------------------------


async def evaluate(
    target: str,
    paths: Sequence[str],
    *,
    api_key: str | None = None,
    root_certificates: bytes | None = None,
    private_key: bytes | None = None,
    certificate_chain: bytes | None = None,
    timeout: float = 30.0,
    episode_timeout: float = 600.0,
    settle_timeout: float = 120.0,
    progress_out: TextIO | None = sys.stderr,
) -> dict[str, Any]:
    """Stores the set under ``paths`` on ``target`` and scores the graph it
    ends with; returns a JSON-ready report."""
    graph_set = load(paths)
    progress = Progress(progress_out)
    async with open_channel(
        target,
        root_certificates=root_certificates,
        private_key=private_key,
        certificate_chain=certificate_chain,
    ) as channel:
        try:
            await asyncio.wait_for(channel.channel_ready(), timeout)
        except TimeoutError as exc:
            raise EvalError(f"no server answered at {target} within {timeout}s") from exc
        client = _Client(channel, timeout, bearer_metadata(api_key))
        try:
            return await _run(client, graph_set, target, episode_timeout, settle_timeout, progress)
        except grpc.aio.AioRpcError as exc:
            raise EvalError(f"{exc.code().name}: {exc.details()}") from exc


async def _run(
    client: _Client,
    graph_set: GraphSet,
    target: str,
    episode_timeout: float,
    settle_timeout: float,
    progress: Progress,
) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    runs = [ProjectRun(p) for p in graph_set.projects]
    total = len(graph_set.episodes())
    counter = [0]
    started = time.perf_counter()
    began = time.time()
    for run in runs:
        await _store_project(client, run, run_id, episode_timeout, progress, counter, total)
    progress(f"stored {total} episodes", final=True)
    still = await _settle(client, settle_timeout, progress)
    # An episode that timed out may have finished meanwhile.
    for run in runs:
        for o in run.outcomes:
            if o.status == TIMED_OUT:
                _take(o, await client.event(o.episode_id, 1.0))
    stored_s = time.perf_counter() - started
    per_project: dict[str, Any] = {}
    misses: dict[str, Any] = {}
    whole = Scored()
    states = []
    for run in runs:
        scored, state = await _score_project(client, run)
        states.append(state)
        per_project[run.project.name] = await _project_figures(client, run, scored, state, began)
        misses[run.project.name] = _misses(run, scored, state)
        _add_scores(whole, run.project.name, scored)
    progress("scored", final=True)
    cost = await llm_cost.project_cost(
        client.memory,
        [run.project_id for run in runs],
        began,
        total,
        timeout=client.timeout,
        metadata=client.metadata,
    )
    return {
        "target": target,
        "files": list(graph_set.files),
        "run_id": run_id,
        "seconds": round(time.perf_counter() - started, 1),
        "store_seconds": round(stored_s, 1),
        "still_pending_after_settle": still,
        "total": {
            **_figures(whole, [o for r in runs for o in r.outcomes], states),
            "llm_cost": cost,
            "llm_tokens_per_episode": cost["tokens_per_episode"],
        },
        "projects": per_project,
        "misses": misses,
    }


async def _project_figures(
    client: _Client, run: ProjectRun, scored: Scored, state: GraphState, began: float
) -> dict[str, Any]:
    """One project's figures, what the service said of each episode, and its LLM cost."""
    figures = {
        "project_id": run.project_id,
        **_figures(scored, run.outcomes, [state]),
        # What the service said about each episode: with a real model,
        # what it extracted is the first thing to read.
        "episodes": [
            {
                "where": o.episode.where,
                "episode_id": o.episode_id,
                "status": o.status,
                "error": o.error,
                "llm_calls": o.llm_calls,
                "entities": [f"{e.name} ({e.type}, #{e.id})" for e in o.entities],
            }
            for o in run.outcomes
        ],
    }
    cost = await llm_cost.project_cost(
        client.memory,
        [run.project_id],
        began,
        len(run.outcomes),
        timeout=client.timeout,
        metadata=client.metadata,
    )
    return {**figures, "llm_cost": cost, "llm_tokens_per_episode": cost["tokens_per_episode"]}


def _add_scores(whole: Scored, project: str, scored: Scored) -> None:
    """``scored`` counted into the whole run's scores."""
    # Gold keys are a project's own ("lisbon" in two projects is two places).
    whole.gold.update({i: f"{project}/{k}" for i, k in scored.gold.items()})
    whole.predicted.update(scored.predicted)
    whole.located.update(scored.located)
    whole.current = (whole.current[0] + scored.current[0], whole.current[1] + scored.current[1])
    whole.as_of = (whole.as_of[0] + scored.as_of[0], whole.as_of[1] + scored.as_of[1])


# The report ---------------------------------------------------------------------------


def _row(name: str, f: dict[str, Any]) -> str:
    cur, asof = f["current_facts"], f["as_of"]
    return (
        f"{name[:22]:<22} {f['bcubed_precision']:>6.3f} {f['bcubed_recall']:>6.3f}"
        f" {f['bcubed_f1']:>6.3f} {f['duplicate_entities']:>4} {f['false_merges']:>5}"
        f" {cur['correct']:>4}/{cur['groups']:<4} {cur['accuracy']:>5.3f}"
        f" {asof['correct']:>4}/{asof['probes']:<4} {asof['accuracy']:>5.3f}"
        f" {f['llm_calls_per_episode']:>6.2f} {f.get('llm_tokens_per_episode', 0):>7,.0f}"
        f" {f['llm_merges']:>5} {f['resolution_pending']:>7}"
    )


def format_report(report: dict[str, Any]) -> str:
    t = report["total"]
    lines = [
        f"{t['episodes']} episodes in {len(report['projects'])} projects ({t['imported']}"
        f" imported late): {t['done']} DONE, {t['failed']} FAILED, {t['timed_out']} without"
        f" an event; {report['seconds']} s",
        f"mentions: {t['mentions']} scripted, {t['mentions_located']} found in their"
        f" episode's event ({t['mentions_missing']} missing, {t['mentions_ambiguous']}"
        f" ambiguous); {t['gold_entities']} expected entities, {t['predicted_entities']} kept",
        "",
        f"{'project':<22} {'B3 P':>6} {'B3 R':>6} {'B3 F1':>6} {'dup':>4} {'false':>5}"
        f" {'current facts':>16} {'as-of probes':>16} {'LLM/ep':>6} {'tok/ep':>7} {'LLM m':>5}"
        f" {'pending':>7}",
    ]
    for name, f in report["projects"].items():
        lines.append(_row(name, f))
    lines.append(_row("all", t))
    by = ", ".join(f"{k} {n}" for k, n in t["aliases_by_method"].items())
    lines += ["", f"aliases by how they were resolved: {by or 'none'}"]
    if "llm_cost" in t:
        lines += ["", *llm_cost.format_cost(t["llm_cost"])]
    if report["still_pending_after_settle"]:
        lines.append(f"still queued after the settle wait: {report['still_pending_after_settle']}")
    for name, m in report["misses"].items():
        notes = []
        for key, ids in m["split"].items():
            notes.append(f"  split: {key} is kept as {', '.join(ids)}")
        for entity, keys in m["merged"].items():
            notes.append(f"  false merge: {entity} holds {', '.join(keys)}")
        for w in m["current_facts"]:
            notes.append(
                f"  current: {w['subject']} {w['label']}: expected {w['expected']}, got {w['got']}"
            )
        for w in m["as_of"]:
            notes.append(
                f"  as of {w['time']}: {w['subject']} {w['label']}: expected {w['expected']},"
                f" got {w['got']}"
            )
        for e in m["episodes"]:
            notes.append(f"  {e['status']}: {e['where']}: {e['error']}")
        notes += [f"  not found: {u}" for u in m["unlocated_mentions"][:20]]
        if len(m["unlocated_mentions"]) > 20:
            notes.append(f"  ... {len(m['unlocated_mentions']) - 20} more not found")
        notes += [f"  LLM merge: {merge}" for merge in m["llm_merges"]]
        if m["pending_entities"]:
            notes.append(f"  pending: {', '.join(m['pending_entities'])}")
        if notes:
            lines += ["", f"{name}:", *notes]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="127.0.0.1:50051", help="server HOST:PORT")
    parser.add_argument(
        "--data",
        nargs="+",
        required=True,
        metavar="FILE",
        help="graph evaluation sets (docs/graph-eval.md), e.g. bench/eval/graph-dev.json",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("NEXUS_API_KEY", ""),
        help="sent as authorization: Bearer KEY (default: $NEXUS_API_KEY)",
    )
    parser.add_argument("--cacert", default=None, help="PEM root certificates: use TLS")
    parser.add_argument("--cert", default=None, help="PEM client certificate, for mTLS")
    parser.add_argument("--key", default=None, help="PEM client private key, for mTLS")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-call deadline (30 s)")
    parser.add_argument(
        "--episode-timeout",
        type=float,
        default=600.0,
        help="how long to wait for one episode's extraction event before sending the next"
        " (600 s; a real model's retries take minutes)",
    )
    parser.add_argument(
        "--settle-timeout",
        type=float,
        default=120.0,
        help="after the last episode, how long to let queued extraction and resolution"
        " jobs finish before reading the graph (120 s)",
    )


def _read(path: str | None) -> bytes | None:
    if not path:
        return None
    with open(path, "rb") as fh:
        return fh.read()


def main(args: argparse.Namespace) -> int:
    prog = "nexus-grpc eval graph"
    if bool(args.cert) != bool(args.key):
        print(f"{prog}: --cert and --key go together (mTLS)", file=sys.stderr)
        return 2
    try:
        roots, key, chain = _read(args.cacert), _read(args.key), _read(args.cert)
    except OSError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if (key or chain) and roots is None:
        print(f"{prog}: --cert/--key need --cacert (mTLS runs over TLS)", file=sys.stderr)
        return 2
    try:
        report = asyncio.run(
            evaluate(
                args.target,
                args.data,
                api_key=args.api_key or None,
                root_certificates=roots,
                private_key=key,
                certificate_chain=chain,
                timeout=args.timeout,
                episode_timeout=args.episode_timeout,
                settle_timeout=args.settle_timeout,
            )
        )
    except (EvalError, DataError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_report(report))
    return 0


__all__ = ["EvalError", "add_arguments", "evaluate", "format_report", "main"]
