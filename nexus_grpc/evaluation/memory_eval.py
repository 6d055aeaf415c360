"""``nexus-grpc eval memories``: how well memories form themselves.

Stores a scripted set (docs/memory-eval.md: projects with their formation
setting, sessions with their user and agent, episodes with their time)
through the public API with whatever LLM the server has, one episode at a
time, waiting for each one's formation to end (WatchExtractions' formation
event); episodes marked ``import`` go through ImportEpisodes. Then it reads
every owner's memories and reports, against what a careful reader would
keep at the end:

- **facts kept**: the share of the facts that should be live that are;
- **stale live**: facts that should have been archived (or never kept:
  an older fact imported late) and are live;
- **archived lost**: facts that should be archived (superseded, with their
  history) and are gone altogether;
- **absent formed**: facts that should never have formed and were stored
  (then archived);
- **duplicates**: live memories beyond one for a fact;
- **unexpected**: live memories that are no fact of the set (junk);
- **leaks**: memories of one user holding a fact of another;
- **LLM calls per episode**: the extraction's (which carries the memory
  candidates) and formation's, from the events.

A live memory is matched to a fact by its text: the candidate texts of the
set (what a careful model proposes for each fact) name the facts. A real
model words its memories its own way, so against one the text match is
approximate (a fact is kept when a live memory of its owner contains the
fact's key words); its figures say what the model gets, the plumbing must
hold either way. Client side only: it never imports the server's modules.
"""

# The ``timeout`` parameters are gRPC deadlines handed to the calls.
# ruff: noqa: ASYNC109

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client.connection import bearer_metadata, open_channel
from nexus_grpc.evaluation import llm_cost
from nexus_grpc.evaluation.eval_errors import DataError, EvalError
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc

#: What a careful reader keeps of each fact at the end: a live memory, an
#: archived one (superseded), or none at all (never formed: an older fact
#: imported late, something not worth keeping).
EXPECTED_STATES = ("live", "archived", "absent")
FORMATIONS = {
    "OFF": memory_pb2.MEMORY_FORMATION_OFF,
    "USER": memory_pb2.MEMORY_FORMATION_USER,
    "USER_AND_PROJECT": memory_pb2.MEMORY_FORMATION_USER_AND_PROJECT,
}
Metadata = tuple[tuple[str, str], ...]


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


@dataclass(frozen=True)
class Fact:
    key: str
    owner: str  # the user, or "" for a project fact
    texts: tuple[str, ...]


@dataclass
class MemorySet:
    name: str
    projects: list[dict[str, Any]]
    facts: dict[str, Fact] = field(default_factory=dict)
    episodes: int = 0


def _need(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind):
        raise DataError(f"{where} must be a {kind.__name__}")
    return value


def load(paths: Sequence[str]) -> MemorySet:
    """One set from the files (their projects together), checked."""
    merged = MemorySet(name="+".join(Path(p).stem for p in paths), projects=[])
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"{path}: {exc}") from exc
        for i, project in enumerate(_need(data.get("projects"), list, f"{path}: projects")):
            where = f"{path}: projects[{i}]"
            if project.get("memory_formation", "USER") not in FORMATIONS:
                raise DataError(f"{where}.memory_formation must be one of {sorted(FORMATIONS)}")
            for j, session in enumerate(_need(project.get("sessions"), list, f"{where}.sessions")):
                for k, episode in enumerate(
                    _need(session.get("episodes"), list, f"{where}.sessions[{j}].episodes")
                ):
                    ew = f"{where}.sessions[{j}].episodes[{k}]"
                    _need(episode.get("user"), str, f"{ew}.user")
                    _need(episode.get("assistant"), str, f"{ew}.assistant")
                    try:
                        datetime.fromisoformat(_need(episode.get("occur_time"), str, ew))
                    except ValueError as exc:
                        raise DataError(f"{ew}.occur_time: {exc}") from exc
                    merged.episodes += 1
                    for n, m in enumerate(episode.get("memories", [])):
                        mw = f"{ew}.memories[{n}]"
                        key = _need(m.get("fact"), str, f"{mw}.fact")
                        _need(m.get("topic"), str, f"{mw}.topic")
                        _need(m.get("content"), str, f"{mw}.content")
                        owner = "" if m.get("about") == "project" else session.get("user_id", "")
                        fact = merged.facts.get(key)
                        texts = (*fact.texts, m["content"]) if fact else (m["content"],)
                        if fact and fact.owner != owner:
                            raise DataError(f"{mw}: fact {key!r} belongs to two owners")
                        merged.facts[key] = Fact(key, owner, texts)
            listed: dict[str, str] = {}
            for state in EXPECTED_STATES:
                for e in project.get("expected", {}).get(state, []):
                    if e.get("fact") not in merged.facts:
                        raise DataError(f"{where}.expected.{state}: no fact {e.get('fact')!r}")
                    if e["fact"] in listed:
                        raise DataError(
                            f"{where}.expected: fact {e['fact']!r} is both"
                            f" {listed[e['fact']]} and {state}"
                        )
                    listed[e["fact"]] = state
            # Every fact the project's episodes propose is scored: one left
            # out of "expected" would be neither counted nor missed.
            unscored = sorted(_facts_of(project) - set(listed))
            if unscored:
                named = ", ".join(map(repr, unscored))
                raise DataError(
                    f"{where}.expected does not say what becomes of {named}"
                    " (live, archived or absent): every fact is scored"
                )
            merged.projects.append(project)
    return merged


def _facts_of(project: dict[str, Any]) -> set[str]:
    """The facts a project's episodes propose."""
    return {
        m["fact"]
        for session in project["sessions"]
        for episode in session["episodes"]
        for m in episode.get("memories", [])
    }


def _timestamp(iso: str) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(datetime.fromisoformat(iso.replace("Z", "+00:00")))
    return ts


@dataclass
class _Run:
    memory: memory_grpc.MemoryServiceStub
    graph: graph_grpc.GraphServiceStub
    metadata: Metadata
    timeout: float
    llm_calls: int = 0
    formed: int = 0
    failed: list[str] = field(default_factory=list)

    async def formation_end(self, episode_id: int) -> graph_pb2.ExtractionEvent | None:
        call = self.graph.WatchExtractions(
            graph_pb2.WatchExtractionsRequest(episode_id=episode_id), metadata=self.metadata
        )
        try:
            async with asyncio.timeout(self.timeout):
                async for event in call:
                    if event.HasField("memory_formation"):
                        return event
                    if event.status == graph_pb2.EXTRACTION_STATUS_DONE:
                        self.llm_calls += event.llm_calls
                    elif event.status == graph_pb2.EXTRACTION_STATUS_FAILED:
                        self.failed.append(f"episode {episode_id}: extraction: {event.error}")
        except TimeoutError:
            self.failed.append(f"episode {episode_id}: no formation within {self.timeout:.0f}s")
        finally:
            call.cancel()
        return None


async def _store(run: _Run, project: dict[str, Any], label: str) -> tuple[int, dict[str, int]]:
    created = await run.memory.CreateProject(
        memory_pb2.CreateProjectRequest(
            project=memory_pb2.Project(
                name=f"{label} {project['key']}",
                memory_formation=FORMATIONS[project.get("memory_formation", "USER")],
            )
        ),
        metadata=run.metadata,
    )
    sessions: dict[str, int] = {}
    for session in project["sessions"]:
        s = await run.memory.CreateSession(
            memory_pb2.CreateSessionRequest(
                session=memory_pb2.Session(
                    project_id=created.id,
                    user_id=session.get("user_id", ""),
                    agent_id=session.get("agent_id", ""),
                )
            ),
            metadata=run.metadata,
        )
        sessions[session["key"]] = s.id
        for n, e in enumerate(session["episodes"]):
            request = memory_pb2.CreateEpisodeRequest(
                session_id=s.id,
                user_message=e["user"],
                ai_response=e["assistant"],
                occur_time=_timestamp(e["occur_time"]),
                request_id=f"eval-{uuid.uuid4().hex}",
            )
            if e.get("import"):

                async def one(r: memory_pb2.CreateEpisodeRequest = request):
                    yield memory_pb2.ImportEpisodesRequest(episode=r)

                done = await run.memory.ImportEpisodes(one(), metadata=run.metadata)
                if done.errors:
                    raise EvalError(f"import refused: {done.errors[0].message}")
                episode_id = done.episode_ids[0]
            else:
                episode_id = (await run.memory.CreateEpisode(request, metadata=run.metadata)).id
            event = await run.formation_end(episode_id)
            if event is None:
                continue
            run.formed += 1
            run.llm_calls += event.memory_formation.llm_calls
            if event.status == graph_pb2.EXTRACTION_STATUS_FAILED:
                run.failed.append(f"{session['key']}[{n}]: formation: {event.error}")
    return created.id, sessions


async def _kept(run: _Run, project_id: int, project: dict[str, Any], sessions: dict[str, int]):
    """Every memory of the project, live and archived, by id: each user's (with
    each of their sessions, so task and session tiers are seen) and the
    project's."""
    found: dict[int, memory_pb2.Memory] = {}
    for session in project["sessions"]:
        scope = memory_pb2.MemoryScope(
            project_id=project_id,
            user_id=session.get("user_id", ""),
            session_id=sessions[session["key"]],
            include_archived=True,
        )
        token = ""
        while True:
            page = await run.memory.ListMemories(
                memory_pb2.ListMemoriesRequest(scope=scope, page_size=100, page_token=token),
                metadata=run.metadata,
            )
            for m in page.memories:
                found.setdefault(m.id, m)
            token = page.next_page_token
            if not token:
                break
    return list(found.values())


def match(memory: memory_pb2.Memory, facts: dict[str, Fact]) -> str | None:
    """The fact a memory states: one of the set's texts for it, exactly (case
    and punctuation aside), else the fact whose texts share the most words
    with it (at least two thirds of the fact's words); None: no fact."""
    mine = " ".join(words(memory.content))
    # Two owners may say the same words: the memory's own owner's fact first.
    ordered = sorted(facts.values(), key=lambda f: f.owner != memory.user_id)
    for f in ordered:
        if any(" ".join(words(t)) == mine for t in f.texts):
            return f.key
    best, score = None, 0.0
    have = set(words(memory.content))
    for f in ordered:
        for t in f.texts:
            theirs = set(words(t)) - {"the", "user", "is", "a", "of", "to"}
            if theirs:
                share = len(theirs & have) / len(theirs)
                if share > score:
                    best, score = f.key, share
    return best if score >= 2 / 3 else None


def score(
    data: MemorySet, stored: list[tuple[dict[str, Any], list[memory_pb2.Memory]]]
) -> dict[str, Any]:
    """``stored``: each project with every memory it holds, live and archived."""
    expected_live = expected_gone = kept = stale = duplicates = unexpected = leaks = 0
    lost = formed_absent = 0
    misses: list[str] = []
    for project, memories in stored:
        expected = project.get("expected", {})
        by_fact: dict[str, list[memory_pb2.Memory]] = {}
        archived_facts: set[str] = set()
        for m in memories:
            if m.tier == memory_pb2.TIER_ARCHIVE:
                key = match(m, data.facts)
                if key is not None and data.facts[key].owner == m.user_id:
                    archived_facts.add(key)
                continue
            key = match(m, data.facts)
            if key is None:
                unexpected += 1
                misses.append(f"unexpected memory {m.id}: {m.content!r}")
                continue
            if data.facts[key].owner != m.user_id:
                # Another owner's fact: a leak, which keeps nothing of theirs.
                leaks += 1
                misses.append(f"memory {m.id} of {m.user_id!r} holds {key} of another owner")
                continue
            by_fact.setdefault(key, []).append(m)
        for e in expected.get("live", []):
            expected_live += 1
            held = by_fact.get(e["fact"], [])
            if held:
                kept += 1
                duplicates += len(held) - 1
                if len(held) > 1:
                    misses.append(f"{e['fact']} is live {len(held)} times")
            else:
                misses.append(f"{e['fact']} is not live")
        for state in ("archived", "absent"):
            for e in expected.get(state, []):
                expected_gone += 1
                if by_fact.get(e["fact"]):
                    stale += 1
                    misses.append(f"{e['fact']} is live but should be {state}")
                elif state == "archived" and e["fact"] not in archived_facts:
                    # Superseded facts stay, archived, with their history.
                    lost += 1
                    misses.append(f"{e['fact']} should be archived and is gone")
                elif state == "absent" and e["fact"] in archived_facts:
                    formed_absent += 1
                    misses.append(f"{e['fact']} should never have formed and is archived")
    return {
        "facts": expected_live,
        "facts_kept": kept / expected_live if expected_live else 1.0,
        "stale_live": stale,
        "stale_checked": expected_gone,
        "archived_lost": lost,
        "absent_formed": formed_absent,
        "duplicates": duplicates,
        "unexpected": unexpected,
        "leaks": leaks,
        "misses": misses,
    }


async def evaluate(
    target: str,
    paths: Sequence[str],
    *,
    api_key: str | None = None,
    timeout: float = 120.0,
    tls: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data = load(paths)
    channel = open_channel(target, **(tls or {}))
    run = _Run(
        memory_grpc.MemoryServiceStub(channel),
        graph_grpc.GraphServiceStub(channel),
        bearer_metadata(api_key),
        timeout,
    )
    label = f"{data.name} {uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    began = time.time()
    try:
        stored = []
        project_ids = []
        for project in data.projects:
            project_id, sessions = await _store(run, project, label)
            project_ids.append(project_id)
            stored.append((project, await _kept(run, project_id, project, sessions)))
        cost = await llm_cost.project_cost(
            run.memory, project_ids, began, data.episodes, metadata=run.metadata
        )
    except grpc.aio.AioRpcError as exc:
        raise EvalError(f"{exc.code().name}: {exc.details()}") from exc
    finally:
        await channel.close()
    report = score(data, stored)
    report.update(
        {
            "set": data.name,
            "episodes": data.episodes,
            "formation_events": run.formed,
            "llm_calls_per_episode": run.llm_calls / data.episodes if data.episodes else 0.0,
            "llm_cost": cost,
            "llm_tokens_per_episode": cost["tokens_per_episode"],
            "failures": run.failed,
            "seconds": round(time.monotonic() - started, 1),
        }
    )
    return report


def format_report(r: dict[str, Any]) -> str:
    lines = [
        f"set {r['set']}: {r['episodes']} episodes, {r['formation_events']} formation events,"
        f" {r['seconds']} s",
        f"facts kept:            {r['facts_kept']:.3f} ({r['facts']} facts)",
        f"stale facts live:      {r['stale_live']} (of {r['stale_checked']} that must not be)",
        f"archived facts lost:   {r['archived_lost']}",
        f"absent facts formed:   {r['absent_formed']}",
        f"duplicates:            {r['duplicates']}",
        f"unexpected memories:   {r['unexpected']}",
        f"cross-user leaks:      {r['leaks']}",
        f"LLM calls per episode: {r['llm_calls_per_episode']:.2f}",
        *(llm_cost.format_cost(r["llm_cost"]) if "llm_cost" in r else []),
    ]
    for miss in r["misses"][:30]:
        lines.append(f"  - {miss}")
    for failure in r["failures"][:10]:
        lines.append(f"  ! {failure}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="127.0.0.1:50051", help="HOST:PORT of the server")
    parser.add_argument("--data", nargs="+", required=True, help="set files (docs/memory-eval.md)")
    parser.add_argument("--api-key", help="an API key (or NEXUS_API_KEY)")
    parser.add_argument(
        "--episode-timeout", type=float, default=120.0, help="seconds to wait for a formation"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def main(args: argparse.Namespace) -> int:
    import os

    try:
        report = asyncio.run(
            evaluate(
                args.target,
                args.data,
                api_key=args.api_key or os.environ.get("NEXUS_API_KEY"),
                timeout=args.episode_timeout,
            )
        )
    except (EvalError, DataError) as exc:
        print(f"eval memories: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
