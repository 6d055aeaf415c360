"""``nexus-grpc eval recall``: how often search finds the evidence.

Stores each conversation through the public gRPC API (the construction in
``locomo.py``), waits until every episode is indexed, then asks every
question with ``SearchEpisodes(project_id, question, mode, limit)`` one at a
time and scores where the first evidence episode lands. Latencies are client
wall-clock per search at concurrency 1, so p50/p99 include the RPC.
"""

# The ``timeout`` parameters are gRPC deadlines handed to the calls, not asyncio timeouts.
# ruff: noqa: ASYNC109

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

import grpc
import grpc.aio

from nexus_grpc.client.connection import bearer_metadata, open_channel
from nexus_grpc.evaluation.eval_errors import DataError, EvalError
from nexus_grpc.evaluation.locomo import NO_REPLY, Conversation, load_all
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc

MODES = {
    "keyword": memory_pb2.SEARCH_MODE_KEYWORD,
    "semantic": memory_pb2.SEARCH_MODE_SEMANTIC,
    "hybrid": memory_pb2.SEARCH_MODE_HYBRID,
    # What a caller gets without asking for a mode.
    "default": memory_pb2.SEARCH_MODE_UNSPECIFIED,
    # The default mode with skip_rerank: the fused order even where the server
    # has a reranker (--reranker-url), to compare the two in one run.
    "fused": memory_pb2.SEARCH_MODE_UNSPECIFIED,
}
SKIP_RERANK = frozenset({"fused"})
KS = (1, 5, 10)
#: Past 10, the depths a reranker reading that many candidates can reach,
#: reported when --limit is at least that large (and --limit itself).
REACH = (20, 30, 50, 100)
Metadata = tuple[tuple[str, str], ...]
INDEX_QUEUE = "index:episodes"
# readme: the construction shared/eval/README.md fixes (the session date in the
# first turn's text). timed: the date moves out of the text into each
# episode's occur_time (the session's time, turns 30 s apart), as an importer
# with episode time would store it. "both" stores each conversation twice, in
# two projects, and reports the timed modes as "timed:<mode>". photos: the
# README's text plus what a client that keeps shared photos would store, the
# photo's caption after the turn that shared it ("[shared a photo: ...]"):
# the README's construction drops them, and with them the only evidence of
# some questions ("What did Melanie paint?" answered by a picture).
CONSTRUCTIONS = ("readme", "timed", "photos")
#: What "--construction both" stores: the README's and the timed one.
BOTH = ("readme", "timed")
TURN_SECONDS = 30


@dataclass
class ModeResult:
    mode: str
    questions: int = 0
    hits: dict[int, int] = field(default_factory=lambda: {k: 0 for k in KS})
    #: Each question's rank of its first evidence (None: not within the limit).
    ranks: list[int | None] = field(default_factory=list)
    limit: int = 10
    reciprocal_rank: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    by_category: dict[int, list[int]] = field(default_factory=dict)  # cat -> [n, hits@10]

    def add(self, rank: int | None, category: int, latency_ms: float) -> None:
        self.questions += 1
        self.ranks.append(rank)
        self.latencies_ms.append(latency_ms)
        cat = self.by_category.setdefault(category, [0, 0])
        cat[0] += 1
        if rank is None:
            return
        self.reciprocal_rank += 1.0 / rank
        for k in KS:
            if rank <= k:
                self.hits[k] += 1
        if rank <= 10:
            cat[1] += 1

    def recall(self, k: int) -> float:
        if k not in self.hits:
            found = sum(1 for r in self.ranks if r is not None and r <= k)
            return found / self.questions if self.questions else 0.0
        return self.hits[k] / self.questions if self.questions else 0.0

    def reach(self) -> list[int]:
        """The depths past 10 this run can report: how far down a reranker
        reading that many candidates would find the evidence."""
        return sorted(k for k in {*REACH, self.limit} if 10 < k <= self.limit)

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)
        return {
            "mode": self.mode,
            "questions": self.questions,
            **{f"recall@{k}": round(self.recall(k), 4) for k in (*KS, *self.reach())},
            "mrr": round(self.reciprocal_rank / self.questions, 4) if self.questions else 0.0,
            "p50_ms": round(percentile(lat, 50), 2),
            "p99_ms": round(percentile(lat, 99), 2),
            "recall@10_by_category": {
                str(c): round(h / n, 4) for c, (n, h) in sorted(self.by_category.items())
            },
        }


def percentile(ordered: Sequence[float], q: float) -> float:
    if not ordered:
        return 0.0
    i = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[i]


@dataclass
class Stored:
    conversation: Conversation
    project_id: int
    episode_ids: list[int]
    construction: str = "readme"


def session_time(date: str) -> float:
    """A LoCoMo session date ("1:56 pm on 8 May, 2023") as epoch seconds, read as UTC."""
    try:
        parsed = datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError as exc:
        raise EvalError(f"session date {date!r} is not like '1:56 pm on 8 May, 2023'") from exc
    return parsed.replace(tzinfo=UTC).timestamp()


def _timed_text(session_date: str, user_message: str) -> str:
    prefix = f"[{session_date}] "
    return user_message[len(prefix) :] if user_message.startswith(prefix) else user_message


def with_photo(text: str, caption: str) -> str:
    return f"{text} [shared a photo: {caption}]" if caption else text


def result_key(construction: str, mode: str) -> str:
    return mode if construction == "readme" else f"{construction}:{mode}"


class Progress:
    """One overwritten line on a terminal, a line per step elsewhere."""

    def __init__(self, out: TextIO | None) -> None:
        self.out = out
        self.tty = bool(out and out.isatty())
        self._last = 0.0

    def __call__(self, text: str, final: bool = False) -> None:
        if self.out is None:
            return
        now = time.monotonic()
        if not final and now - self._last < (0.2 if self.tty else 5.0):
            return
        self._last = now
        if self.tty:
            self.out.write("\r\x1b[2K" + text + ("\n" if final else ""))
        else:
            self.out.write(text + "\n")
        self.out.flush()


async def _store(
    stub: memory_grpc.MemoryServiceStub,
    conv: Conversation,
    run_id: str,
    timeout: float,
    done: list[int],
    construction: str = "readme",
    metadata: Metadata = (),
) -> Stored:
    project = await stub.CreateProject(
        memory_pb2.CreateProjectRequest(
            project=memory_pb2.Project(name=f"recall-eval {conv.name} {construction} {run_id}")
        ),
        timeout=timeout,
        metadata=metadata,
    )
    ids: list[int] = []
    # Episodes go in conversation order, one at a time: order is part of a
    # conversation (a turn's neighbours are context).
    for n, session in enumerate(conv.sessions, start=1):
        created = await stub.CreateSession(
            memory_pb2.CreateSessionRequest(
                session=memory_pb2.Session(name=f"session {n}", project_id=project.id)
            ),
            timeout=timeout,
            metadata=metadata,
        )
        start = session_time(session.date) if construction == "timed" else 0.0
        for i, episode in enumerate(session.episodes):
            request = memory_pb2.CreateEpisodeRequest(
                session_id=created.id,
                user_message=episode.user_message,
                ai_response=episode.ai_response,
                request_id=f"{run_id}-{conv.name}-{construction}-{n}-{i}",
            )
            if construction == "timed":
                request.user_message = _timed_text(session.date, episode.user_message)
                request.occur_time.FromNanoseconds(int((start + i * TURN_SECONDS) * 1e9))
            elif construction == "photos":
                request.user_message = with_photo(episode.user_message, episode.user_photo)
                if episode.ai_response != NO_REPLY:
                    request.ai_response = with_photo(episode.ai_response, episode.ai_photo)
            reply = await stub.CreateEpisode(request, timeout=timeout, metadata=metadata)
            ids.append(reply.id)
            done[0] += 1
    return Stored(conv, project.id, ids, construction)


async def _wait_indexed(
    stub: memory_grpc.MemoryServiceStub,
    progress: Progress,
    timeout: float,
    deadline_s: float,
    metadata: Metadata = (),
) -> None:
    end = time.monotonic() + deadline_s
    while True:
        status = await stub.GetServiceStatus(
            memory_pb2.GetServiceStatusRequest(), timeout=timeout, metadata=metadata
        )
        queue = next((q for q in status.queues if q.kind == INDEX_QUEUE), None)
        pending = queue.pending if queue else 0
        if queue and queue.failed:
            raise EvalError(f"{queue.failed} episodes failed to index; see GetServiceStatus")
        if pending == 0:
            progress("indexed", final=True)
            return
        if time.monotonic() > end:
            raise EvalError(f"{pending} episodes still waiting to be indexed after {deadline_s}s")
        progress(f"indexing: {pending} episodes to go")
        await asyncio.sleep(0.25)  # polling a remote server: there is no event to wait on


async def _ask(
    stub: memory_grpc.MemoryServiceStub,
    stored: list[Stored],
    modes: list[str],
    limit: int,
    timeout: float,
    progress: Progress,
    metadata: Metadata = (),
) -> dict[str, ModeResult]:
    results = {
        result_key(s.construction, m): ModeResult(result_key(s.construction, m), limit=limit)
        for s in stored
        for m in modes
    }
    total = sum(len(s.conversation.questions) for s in stored) * len(modes)
    asked = 0
    for mode in modes:
        for s in stored:
            key = result_key(s.construction, mode)
            position = {episode_id: i for i, episode_id in enumerate(s.episode_ids)}
            for q in s.conversation.questions:
                start = time.perf_counter()
                rank = None
                n = 0
                async for hit in stub.SearchEpisodes(
                    memory_pb2.SearchEpisodesRequest(
                        project_id=s.project_id,
                        query=q.text,
                        mode=MODES[mode],
                        limit=limit,
                        skip_rerank=mode in SKIP_RERANK,
                    ),
                    timeout=timeout,
                    metadata=metadata,
                ):
                    n += 1
                    if rank is None and position.get(hit.episode.id) in q.evidence:
                        rank = n
                latency = (time.perf_counter() - start) * 1000
                results[key].add(rank, q.category, latency)
                asked += 1
                progress(f"asking: {asked}/{total} searches ({mode})")
    progress(f"asked {asked} searches", final=True)
    return results


async def evaluate(
    target: str,
    paths: list[str],
    *,
    modes: Sequence[str] = ("keyword", "semantic", "hybrid", "default"),
    limit: int = 10,
    api_key: str | None = None,
    timeout: float = 30.0,
    index_deadline: float = 1800.0,
    progress_out: TextIO | None = sys.stderr,
    construction: str = "readme",
) -> dict[str, Any]:
    """Stores the conversations under ``paths`` on ``target`` and asks their questions.

    Returns a JSON-ready report: per mode recall@1/5/10, MRR, per-category
    recall@10 and search latency."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise EvalError(f"unknown mode {', '.join(unknown)}; expected {', '.join(MODES)}")
    if construction not in (*CONSTRUCTIONS, "both", "all"):
        raise EvalError(
            f"unknown construction {construction!r}; expected readme, timed, photos, both or all"
        )
    constructions = list({"both": BOTH, "all": CONSTRUCTIONS}.get(construction, (construction,)))
    conversations = load_all(paths)
    if "timed" in constructions:
        for c in conversations:  # a bad date fails before anything is stored
            for session in c.sessions:
                session_time(session.date)
    progress = Progress(progress_out)
    metadata = bearer_metadata(api_key)
    # Every write carries a request_id and the rest are reads: the clients' retry
    # policy is safe here.
    async with open_channel(target) as channel:
        try:
            await asyncio.wait_for(channel.channel_ready(), timeout)
        except TimeoutError as exc:
            raise EvalError(f"no server answered at {target} within {timeout}s") from exc
        stub = memory_grpc.MemoryServiceStub(channel)
        run_id = uuid.uuid4().hex[:8]
        episodes = sum(len(c.episodes()) for c in conversations) * len(constructions)
        done = [0]
        started = time.perf_counter()
        try:
            tasks = [
                asyncio.ensure_future(_store(stub, c, run_id, timeout, done, k, metadata))
                for k in constructions
                for c in conversations
            ]
            while not all(t.done() for t in tasks):
                progress(f"storing: {done[0]}/{episodes} episodes")
                await asyncio.wait(tasks, timeout=0.2)
            stored = [t.result() for t in tasks]
            progress(f"stored {episodes} episodes", final=True)
            await _wait_indexed(stub, progress, timeout, index_deadline, metadata)
            ingest_s = time.perf_counter() - started
            results = await _ask(stub, stored, list(modes), limit, timeout, progress, metadata)
        except grpc.aio.AioRpcError as exc:
            raise EvalError(f"{exc.code().name}: {exc.details()}") from exc
    return {
        "target": target,
        "conversations": [c.name for c in conversations],
        "constructions": constructions,
        "episodes": episodes,
        "questions": sum(len(c.questions) for c in conversations),
        "skipped_questions": sum(c.skipped for c in conversations),
        "limit": limit,
        "ingest_seconds": round(ingest_s, 2),
        "modes": {m: r.summary() for m, r in results.items()},
    }


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"{report['episodes']} episodes, {report['questions']} questions"
        f" ({report['skipped_questions']} without mapped evidence skipped),"
        f" {len(report['conversations'])} conversations; limit={report['limit']};"
        f" stored and indexed in {report['ingest_seconds']} s",
        "",
        f"{'mode':<16} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'p50 ms':>8} {'p99 ms':>8}",
    ]
    for m in report["modes"].values():
        lines.append(
            f"{m['mode']:<16} {m['recall@1']:>6.3f} {m['recall@5']:>6.3f} {m['recall@10']:>6.3f}"
            f" {m['mrr']:>6.3f} {m['p50_ms']:>8.1f} {m['p99_ms']:>8.1f}"
        )
    deeper = [k for k in REACH if any(f"recall@{k}" in m for m in report["modes"].values())]
    if report["limit"] not in (*KS, *deeper):
        deeper.append(report["limit"])
    if deeper:
        lines += ["", "reach: the evidence within the first k hits (a reranker of k can order)"]
        lines.append(f"{'mode':<16} " + " ".join(f"{'R@' + str(k):>7}" for k in deeper))
        for m in report["modes"].values():
            cells = " ".join(f"{m.get(f'recall@{k}', 0.0):>7.3f}" for k in deeper)
            lines.append(f"{m['mode']:<16} {cells}")
    cats = sorted({c for m in report["modes"].values() for c in m["recall@10_by_category"]})
    lines += [
        "",
        "recall@10 by question category",
        f"{'mode':<16} " + " ".join(f"{'cat ' + c:>7}" for c in cats),
    ]
    for m in report["modes"].values():
        by = m["recall@10_by_category"]
        lines.append(f"{m['mode']:<16} " + " ".join(f"{by.get(c, 0):>7.3f}" for c in cats))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="127.0.0.1:50051", help="server HOST:PORT")
    parser.add_argument(
        "--data",
        nargs="+",
        required=True,
        metavar="PATH",
        help="LoCoMo-format conversation files, or folders of them",
    )
    parser.add_argument(
        "--modes",
        default="keyword,semantic,hybrid,default",
        help="comma-separated: keyword, semantic, hybrid, default (the four by default), and"
        " fused (the default mode with skip_rerank: the fused order, to compare with a"
        " server's reranker)",
    )
    parser.add_argument("--limit", type=int, default=10, help="hits asked per search (10)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--api-key", default=None, help="sent as authorization: Bearer KEY")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-call deadline (30 s)")
    parser.add_argument(
        "--construction",
        choices=(*CONSTRUCTIONS, "both", "all"),
        default="readme",
        help="readme: the date in the text (shared/eval/README.md); timed: the date as each"
        " episode's occur_time instead; photos: readme plus each shared photo's caption;"
        " both: readme and timed side by side; all: the three (readme)",
    )


def main(args: argparse.Namespace) -> int:
    modes = [m.strip() for m in str(args.modes).split(",") if m.strip()]
    if args.limit < 10:
        print("nexus-grpc eval recall: --limit must be at least 10 (recall@10)", file=sys.stderr)
        return 2
    try:
        report = asyncio.run(
            evaluate(
                args.target,
                args.data,
                modes=modes,
                limit=args.limit,
                api_key=args.api_key,
                timeout=args.timeout,
                construction=args.construction,
            )
        )
    except (EvalError, DataError) as exc:
        print(f"nexus-grpc eval recall: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0


__all__ = ["EvalError", "ModeResult", "add_arguments", "evaluate", "format_report", "main"]
