"""``nexus-grpc bench``: a ghz-style load generator for a running server.

Closed loop by default: ``--concurrency`` workers each fire back-to-back for
``--duration`` seconds.  ``--rps R`` switches to an open loop: arrivals are
scheduled every ``1/R`` seconds and handed to the workers, and each latency is
measured from the arrival's *scheduled* time, so a slow server is charged for
the queueing it causes (no coordinated omission).

RPCs: ``health`` (grpc.health.v1 Check, the baseline), ``create_episode``,
``search_episodes`` (server streaming: time to first hit and total),
``get_episode`` and ``mixed`` (``--mix create=4,search=4,watch=1,health=1``;
``watch`` opens WatchExtractions on a random session, reads the first event or
waits 1 s, then cancels).  Several comma-separated ``--rpc`` names run one after
another.

What a run leaves behind: the RPCs that write (create_episode, search_episodes
and get_episode seed episodes, mixed) write into a project of the run's own,
``nexus-bench <run id>``, named when it is made.  When the run ends its
sessions and episodes are counted, and the background jobs it queued (their
embeddings; with an LLM, extraction, summaries) are read from
GetServiceStatus and reported; ``--wait-backlog S`` waits up to S seconds for
them first (those an LLM that is off would run are reported, not waited for).
The command deletes the project with its sessions and episodes first
(its sessions one by one, then the project), also when the run fails or is
interrupted after making it; ``--keep`` keeps it, and the report names it.
``run_bench`` keeps it unless given ``cleanup=True``: ``make bench`` measures
run after run on a server of its own, which it discards whole.

An open loop (``--rps``) that could not start its calls on schedule (every
worker busy, or the client's own CPU short) says so: the latencies it reports
then include that wait in the client, and the rate it reached is not the one
asked for.

Programmatic use: ``await run_bench(target, rpc, concurrency, duration, **opts)``
returns a ``BenchResult``; ``format_result`` renders it as a small table.  The
loop itself is ``nexus_grpc.loadtest.loop.drive``, which ``make bench`` shares;
this module adds the RPCs, their setup and the CLI.
"""

# The ``timeout`` parameters are gRPC deadlines handed to the calls, not asyncio timeouts.
# ruff: noqa: ASYNC109

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import random
import shlex
import sys
import time
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.client.connection import bearer_metadata, open_channel
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.loadtest.loop import Call, Load, LoadError, OpStats, Pick, drive, percentile

__all__ = [
    "RPC_NAMES",
    "BenchError",
    "BenchResult",
    "OpStats",
    "add_arguments",
    "format_result",
    "main",
    "parse_mix",
    "percentile",
    "run_bench",
]

RPC_NAMES = ("health", "create_episode", "search_episodes", "get_episode", "mixed")
#: Queues whose workers wait for an LLM: with the LLM off they never drain.
LLM_QUEUES = ("extract:episode", "summarize:session", "form:memories", "resolve:entity")
#: GetServiceStatus's names for the LLM dependency (its --llm-api).
LLM_DEPENDENCIES = ("ollama", "openai")
BACKLOG_POLL_S = 0.25
# How long cleanup follows the project's erasure before it leaves it to the
# server (it goes on there, across restarts).
CLEANUP_WAIT_S = 120.0
MIX_OPS = ("create", "search", "get", "watch", "health")
DEFAULT_MIX = "create=4,search=4,watch=1,health=1"
SEARCH_MODES = {
    "keyword": memory_pb2.SEARCH_MODE_KEYWORD,
    "semantic": memory_pb2.SEARCH_MODE_SEMANTIC,
    "hybrid": memory_pb2.SEARCH_MODE_HYBRID,
}
WORKERS_PER_CHANNEL = 16
WATCH_WAIT_S = 1.0
#: An open loop kept its rate when at least this share of the calls scheduled
#: in the measured window started inside it.
RATE_KEPT = 0.9

# The op each single-RPC run drives.
_RPC_OP = {
    "health": "health",
    "create_episode": "create",
    "search_episodes": "search",
    "get_episode": "get",
}
_STREAMING_OPS = frozenset({"search", "watch"})

WORDS = (
    "the project deadline moved to friday so we need to finish the migration plan "
    "before the review meeting with the database team about postgres replication "
    "latency and the new caching layer for the search service python rust golang "
    "kubernetes cluster deployment pipeline tests failing on the staging branch "
    "because the config file points at an old endpoint customer feedback says "
    "the mobile app feels slow when loading the dashboard charts we should profile "
    "the api gateway and check memory usage of the worker pool maybe add an index "
    "on the orders table alice suggested a queue for background jobs bob prefers "
    "cron tasks budget approval for the gpu servers arrives next month the design "
    "doc covers authentication tokens rate limits retries and error handling "
    "vacation in lisbon booked for august remember to renew the passport and "
    "water the plants book club reads a novel about a lighthouse keeper recipe "
    "for lentil soup needs cumin garlic onions and lemon the marathon training "
    "plan has long runs on sunday physics lecture on entropy and thermodynamics "
    "music practice piano scales chords jazz improvisation weekend hiking trail "
    "near the river with great views embeddings vectors similarity ranking recall "
    "precision benchmark throughput latency percentile histogram"
).split()


class BenchError(Exception):
    """The benchmark could not start (server unreachable, setup RPC failed, bad options)."""


def parse_mix(text: str) -> dict[str, float]:
    """``"create=4,search=4,watch=1,health=1"`` -> weights by op name."""
    weights: dict[str, float] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if name not in MIX_OPS:
            raise BenchError(f"unknown --mix op {name!r}; expected one of {', '.join(MIX_OPS)}")
        try:
            weight = float(value) if sep else 1.0
        except ValueError:
            raise BenchError(f"bad --mix weight in {part!r}") from None
        if weight < 0:
            raise BenchError(f"negative --mix weight in {part!r}")
        weights[name] = weight
    if not weights or sum(weights.values()) <= 0:
        raise BenchError(f"--mix {text!r} has no positive weight")
    return weights


# --- results ------------------------------------------------------------------------


@dataclass
class BenchResult:
    """One run of one RPC; ``to_dict()`` is what ``--json`` writes.

    Latencies cover successful calls; failures are counted in ``errors`` by status
    code name.  ``rps`` is every finished call over ``elapsed_s``.
    """

    rpc: str
    target: str
    concurrency: int
    duration_s: float
    elapsed_s: float
    load: str  # "closed" or "open"
    rps_target: float | None
    channels: int
    warmup_s: float
    count: int
    ok: int
    rps: float
    errors: dict[str, int]
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    min_ms: float
    first_item_p50_ms: float | None = None
    first_item_p99_ms: float | None = None
    ops: dict[str, OpStats] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    command: str = ""
    timestamp: str = ""
    #: The run's own project, when it wrote: id, name, sessions, episodes, and
    #: whether --cleanup removed it.
    project: dict[str, Any] | None = None
    #: Background jobs the run queued that were still waiting when it ended
    #: (after --wait-backlog): pending jobs per queue, above where they stood
    #: before the run.
    backlog: dict[str, int] = field(default_factory=dict)
    #: Queues in ``backlog`` that wait for an LLM that is off.
    backlog_needs_llm: list[str] = field(default_factory=list)
    #: Seconds --wait-backlog waited (None: not asked).
    backlog_wait_s: float | None = None
    #: Open loop: the calls that started inside the measured window, a second
    #: of it (the rate the client kept), and how late calls started after
    #: their scheduled time (their latency includes it).
    started_rps: float | None = None
    start_lag_p50_ms: float | None = None
    start_lag_max_ms: float | None = None
    #: What a reader of the figures must know (a missed target rate).
    warnings: list[str] = field(default_factory=list)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- the load ------------------------------------------------------------------------


def _words(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    length = 0
    sentence = 0
    while length < chars:
        word = rng.choice(WORDS)
        if sentence == 0:
            word = word.capitalize()
        sentence += 1
        if sentence >= rng.randint(8, 16):
            word += "."
            sentence = 0
        out.append(word)
        length += len(word) + 1
    text = " ".join(out)
    return text if text.endswith(".") else text + "."


class _Context:
    """Channels, stubs and the data the ops draw from."""

    def __init__(self, target: str, opts: dict[str, Any]) -> None:
        self.target = target
        self.opts = opts
        self.run_id = uuid.uuid4().hex[:10]
        self.seq = itertools.count()
        self.channels: list[grpc.aio.Channel] = []
        self.memory: list[memory_grpc.MemoryServiceStub] = []
        self.graph: list[graph_grpc.GraphServiceStub] = []
        self.health: list[health_pb2_grpc.HealthStub] = []
        self.project_id = 0
        self.project_name = f"nexus-bench {self.run_id}"
        self.session_ids: list[int] = []
        self.episode_ids: list[int] = []
        #: Episodes this run stored (seeds and creates), for its report.
        self.episodes_created = 0
        rng = random.Random(opts["seed"])
        self.texts = [_words(rng, opts["text_chars"]) for _ in range(256)]
        self.query: str | None = opts.get("query")
        self._asked: set[str] = set()
        self.timeout: float | None = opts["timeout"]
        self.metadata: tuple[tuple[str, str], ...] | None = (
            bearer_metadata(opts.get("api_key")) or None
        )

    def next_query(self, rng: random.Random) -> str:
        """``--query`` if given, else a word pair no earlier call of this run asked:
        the server remembers query vectors (--query-vector-cache), and a repeated
        pair would be answered without the embedding a new question costs."""
        if self.query:
            return self.query
        for _ in range(32):  # 12,720 pairs: a run of a few thousand calls finds new ones
            text = " ".join(rng.sample(WORDS, 2))
            if text not in self._asked:
                break
        self._asked.add(text)
        return text

    async def connect(self, n: int) -> None:
        for i in range(n):
            # A local subchannel pool gives every channel its own HTTP/2 connection.
            options = [("grpc.use_local_subchannel_pool", 1), ("nexus.bench.channel", i)]
            # No retries: the bench counts every failed call, and its figures stay
            # comparable with those taken before the client retried.
            channel = open_channel(
                self.target,
                root_certificates=self.opts.get("root_certificates"),
                retry=None,
                options=options,
            )
            self.channels.append(channel)
            self.memory.append(memory_grpc.MemoryServiceStub(channel))
            self.graph.append(graph_grpc.GraphServiceStub(channel))
            self.health.append(health_pb2_grpc.HealthStub(channel))
        wait = self.opts["connect_timeout"]
        try:
            await asyncio.wait_for(
                asyncio.gather(*(c.channel_ready() for c in self.channels)), wait
            )
        except TimeoutError:
            raise BenchError(
                f"cannot connect to {self.target} within {wait:g}s; is the server running?"
            ) from None

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.channels), return_exceptions=True)

    async def _setup_call(self, what: str, coro: Awaitable[Any]) -> Any:
        try:
            return await coro
        except grpc.aio.AioRpcError as exc:
            raise BenchError(f"setup failed: {what}: {exc.code().name}: {exc.details()}") from None

    async def prepare(self, ops: set[str]) -> None:
        """Creates the project, sessions and seed episodes the ops need."""
        stub = self.memory[0]
        md, timeout = self.metadata, self.timeout
        if not ops & {"create", "search", "get", "watch"}:
            return
        try:
            project = await stub.CreateProject(
                memory_pb2.CreateProjectRequest(
                    project=memory_pb2.Project(
                        name=self.project_name,
                        description="created by nexus-grpc bench",
                    )
                ),
                timeout=timeout,
                metadata=md,
            )
            self.project_id = project.id
            progress = self.opts.get("progress")
            if progress is not None:
                print(
                    f"bench: writing into project {project.id} {self.project_name!r}"
                    + (" (removed at the end)" if self.opts.get("cleanup") else " (kept)"),
                    file=progress,
                    flush=True,
                )
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise BenchError(
                    f"setup failed: CreateProject: {exc.code().name}: {exc.details()}"
                ) from None
        for k in range(max(1, self.opts["sessions"])):
            session = await self._setup_call(
                "CreateSession",
                stub.CreateSession(
                    memory_pb2.CreateSessionRequest(
                        session=memory_pb2.Session(
                            name=f"bench {self.run_id} #{k}", project_id=self.project_id
                        )
                    ),
                    timeout=timeout,
                    metadata=md,
                ),
            )
            self.session_ids.append(session.id)
        # Searches aimed at given sessions find nothing in our own: seeding them would
        # only leave the server embedding in the background while it is measured.
        searches_own = "search" in ops and not self.opts.get("search_session_ids")
        if searches_own or "get" in ops:
            rng = random.Random(self.opts["seed"] + 7)
            slots = asyncio.Semaphore(8)

            async def seed(i: int) -> None:
                async with slots:
                    episode = await self._setup_call(
                        "CreateEpisode",
                        stub.CreateEpisode(
                            self._episode_request(rng, f"seed-{i}"),
                            timeout=timeout,
                            metadata=md,
                        ),
                    )
                    self.episode_ids.append(episode.id)
                    self.episodes_created += 1

            await asyncio.gather(*(seed(i) for i in range(self.opts["seed_episodes"])))
            if "get" in ops and not self.episode_ids:
                raise BenchError("setup failed: no seed episodes to get")

    async def pending_jobs(self) -> tuple[dict[str, int], bool]:
        """Pending jobs per queue, and whether the server's LLM is off; ({},
        False) from a server that cannot say (an older one, a refusal)."""
        try:
            status = await self.memory[0].GetServiceStatus(
                memory_pb2.GetServiceStatusRequest(), timeout=self.timeout, metadata=self.metadata
            )
        except grpc.aio.AioRpcError:
            return {}, False
        llm_off = any(d.off for d in status.dependencies if d.name in LLM_DEPENDENCIES)
        return {q.kind: q.pending for q in status.queues}, llm_off

    async def backlog(
        self, before: dict[str, int], wait: float | None
    ) -> tuple[dict[str, int], list[str], float | None]:
        """The jobs the run left queued (pending above ``before``), after waiting
        up to ``wait`` seconds for those that can run; the queues among them
        that need an LLM that is off; and how long the wait took."""
        started = time.perf_counter()
        while True:
            now, llm_off = await self.pending_jobs()
            left = {k: n - before.get(k, 0) for k, n in now.items() if n > before.get(k, 0)}
            stuck = sorted(k for k in left if llm_off and k in LLM_QUEUES)
            waited = time.perf_counter() - started
            if wait is None or set(left) <= set(stuck) or waited >= wait:
                return left, stuck, (None if wait is None else round(waited, 2))
            await asyncio.sleep(BACKLOG_POLL_S)

    async def cleanup_after_failure(self) -> None:
        """``cleanup`` for a run that failed or was interrupted after making
        its project: the run's own error goes on; the project is named if it
        cannot be removed."""
        if not self.session_ids and not self.project_id:
            return
        progress = self.opts.get("progress") or sys.stderr
        try:
            await self.cleanup()
        except (BenchError, grpc.aio.AioRpcError, OSError) as exc:
            print(
                f"bench: the run's project {self.project_id} {self.project_name!r} is left"
                f" behind: {exc}",
                file=progress,
            )
        else:
            print(f"bench: removed the run's project {self.project_id}", file=progress)

    async def cleanup(self) -> None:
        """Deletes the run's project, which takes its sessions, episodes,
        summaries and index points with it, and waits for that erasure to be
        done (a session made outside the project, if any, is deleted first)."""
        stub, md, timeout = self.memory[0], self.metadata, self.timeout
        if not self.project_id:
            for session_id in self.session_ids:
                await self._setup_call(
                    "DeleteSession",
                    stub.DeleteSession(
                        memory_pb2.DeleteSessionRequest(id=session_id), timeout=timeout, metadata=md
                    ),
                )
            return
        deleted = await self._setup_call(
            "DeleteProject",
            stub.DeleteProject(
                memory_pb2.DeleteProjectRequest(id=self.project_id), timeout=timeout, metadata=md
            ),
        )
        watch = stub.WatchErasure(
            memory_pb2.WatchErasureRequest(id=deleted.erasure_id),
            timeout=CLEANUP_WAIT_S,
            metadata=md,
        )
        async for erasure in watch:
            if erasure.state == memory_pb2.ERASURE_STATE_DONE:
                watch.cancel()
                return

    def _episode_request(self, rng: random.Random, tag: str) -> memory_pb2.CreateEpisodeRequest:
        return memory_pb2.CreateEpisodeRequest(
            session_id=rng.choice(self.session_ids),
            user_message=rng.choice(self.texts),
            ai_response=rng.choice(self.texts),
            request_id=f"bench-{self.run_id}-{tag}",
        )

    def op_function(self, op: str, slot: int) -> Call:
        """The coroutine function of one op on the channel ``slot``; it returns the
        ``perf_counter`` time of the first streamed item, if any."""
        memory = self.memory[slot]
        md, timeout = self.metadata, self.timeout

        if op == "health":
            health = self.health[slot]
            request = health_pb2.HealthCheckRequest(service=self.opts["health_service"])

            async def do_health(rng: random.Random) -> float | None:
                await health.Check(request, timeout=timeout, metadata=md)
                return None

            return do_health

        if op == "create":

            async def do_create(rng: random.Random) -> float | None:
                request = self._episode_request(rng, str(next(self.seq)))
                await memory.CreateEpisode(request, timeout=timeout, metadata=md)
                self.episodes_created += 1
                return None

            return do_create

        if op == "get":

            async def do_get(rng: random.Random) -> float | None:
                request = memory_pb2.GetEpisodeRequest(id=rng.choice(self.episode_ids))
                await memory.GetEpisode(request, timeout=timeout, metadata=md)
                return None

            return do_get

        if op == "search":
            mode = SEARCH_MODES[self.opts["mode"]]
            limit = self.opts["limit"]

            # Existing sessions (e.g. a seeded 100k-episode database) when given.
            scope = self.opts.get("search_session_ids") or self.session_ids

            async def do_search(rng: random.Random) -> float | None:
                request = memory_pb2.SearchEpisodesRequest(
                    query=self.next_query(rng),
                    session_id=rng.choice(scope),
                    limit=limit,
                    mode=mode,
                )
                first: float | None = None
                call = memory.SearchEpisodes(request, timeout=timeout, metadata=md)
                async for _hit in call:
                    if first is None:
                        first = time.perf_counter()
                return first

            return do_search

        if op == "watch":
            graph = self.graph[slot]

            async def do_watch(rng: random.Random) -> float | None:
                request = graph_pb2.WatchExtractionsRequest(session_id=rng.choice(self.session_ids))
                call = graph.WatchExtractions(request, metadata=md)
                first: float | None = None
                try:
                    async with asyncio.timeout(WATCH_WAIT_S):
                        item = await call.read()
                    if item is not grpc.aio.EOF:
                        first = time.perf_counter()
                except TimeoutError:
                    pass
                finally:
                    call.cancel()
                return first

            return do_watch

        raise BenchError(f"unknown op {op!r}")


async def run_bench(
    target: str,
    rpc: str,
    concurrency: int,
    duration: float,
    *,
    rps: float | None = None,
    mix: str | dict[str, float] = DEFAULT_MIX,
    warmup: float = 0.0,
    query: str | None = None,
    mode: str = "hybrid",
    sessions: int = 8,
    seed_episodes: int = 32,
    search_session_ids: Sequence[int] | None = None,
    limit: int = 10,
    timeout: float | None = 10.0,
    connect_timeout: float = 5.0,
    channels: int | None = None,
    api_key: str | None = None,
    root_certificates: bytes | None = None,
    health_service: str = "",
    seed: int = 1,
    text_chars: int = 300,
    progress: TextIO | None = None,
    command: str | None = None,
    cleanup: bool = False,
    wait_backlog: float | None = None,
) -> BenchResult:
    """Runs one benchmark and returns its result.

    A run that writes does so in a project of its own; ``cleanup`` deletes it
    (its sessions and episodes) at the end, and ``wait_backlog`` waits up to
    that many seconds for the background jobs the run queued before the
    result reports those still waiting.

    Raises ``BenchError`` when the run cannot start: the server does not answer
    within ``connect_timeout`` seconds, a setup RPC fails or an option is invalid.
    """
    _check_options(rpc, concurrency, duration, rps, mode, wait_backlog)
    weights = (
        (parse_mix(mix) if isinstance(mix, str) else dict(mix))
        if rpc == "mixed"
        else {_RPC_OP[rpc]: 1.0}
    )
    n_channels = min(channels or max(1, math.ceil(concurrency / WORKERS_PER_CHANNEL)), concurrency)
    shape = _Shape(rpc, target, concurrency, duration, rps, n_channels, warmup, weights)
    opts: dict[str, Any] = {
        "query": query,
        "mode": mode,
        "sessions": sessions,
        "seed_episodes": seed_episodes,
        "search_session_ids": list(search_session_ids or []),
        "limit": limit,
        "timeout": timeout,
        "connect_timeout": connect_timeout,
        "api_key": api_key,
        "root_certificates": root_certificates,
        "health_service": health_service,
        "seed": seed,
        "text_chars": text_chars,
        "cleanup": cleanup,
        "progress": progress,
    }
    timestamp = datetime.now(UTC).isoformat(timespec="seconds")
    if command is None:
        command = " ".join(shlex.quote(a) for a in sys.argv)
    run = await _load(_Context(target, opts), shape, wait_backlog)
    return _result(run, shape, opts, command, timestamp)


def _check_options(
    rpc: str, concurrency: int, duration: float, rps: float | None, mode: str, wait: float | None
) -> None:
    """``BenchError`` saying which option is wrong, before anything is called."""
    if rpc not in RPC_NAMES:
        raise BenchError(f"unknown rpc {rpc!r}; expected one of {', '.join(RPC_NAMES)}")
    if concurrency < 1:
        raise BenchError("concurrency must be at least 1")
    if duration <= 0:
        raise BenchError("duration must be positive")
    if rps is not None and rps <= 0:
        raise BenchError("--rps must be positive")
    if mode not in SEARCH_MODES:
        raise BenchError(f"unknown search mode {mode!r}")
    if wait is not None and wait < 0:
        raise BenchError("--wait-backlog must not be negative")


@dataclass(frozen=True)
class _Shape:
    """The load a run puts on the server: which calls, how many at once, how long."""

    rpc: str
    target: str
    concurrency: int
    duration: float
    rps: float | None
    channels: int
    warmup: float
    weights: dict[str, float]

    @property
    def op_names(self) -> list[str]:
        return [name for name, w in self.weights.items() if w > 0]


@dataclass
class _Run:
    """What a run measured, and what it left on the server."""

    load: Load
    project: dict[str, Any] | None = None
    backlog: tuple[dict[str, int], list[str], float | None] = ({}, [], None)


async def _load(ctx: _Context, shape: _Shape, wait_backlog: float | None) -> _Run:
    """Connects, seeds what the calls need, drives the load, then cleans up
    (with ``cleanup``; also when the run fails or is interrupted) and reads the
    backlog the run left."""
    progress = ctx.opts["progress"]
    try:
        await ctx.connect(shape.channels)
        before, _ = await ctx.pending_jobs()
        try:
            run = _Run(await _drive(ctx, shape))
        except BaseException:
            # A failed or interrupted run removes what it made too (Ctrl-C
            # cancels the run; the cleanup's calls still go out).
            if ctx.opts["cleanup"]:
                await ctx.cleanup_after_failure()
            raise
        if ctx.session_ids:
            run.project = project = {
                "id": ctx.project_id,
                "name": ctx.project_name if ctx.project_id else "",
                "sessions": len(ctx.session_ids),
                "episodes": ctx.episodes_created,
                "removed": False,
            }
            if ctx.opts["cleanup"]:
                await ctx.cleanup()
                project["removed"] = True
            # After the cleanup: what is left queued then (its own index jobs
            # included) is what the run leaves the server.
            if wait_backlog and progress is not None:
                print(f"bench: waiting up to {wait_backlog:g}s for the backlog", file=progress)
            run.backlog = await ctx.backlog(before, wait_backlog)
    finally:
        await ctx.close()
    return run


def _result(
    run: _Run, shape: _Shape, opts: dict[str, Any], command: str, timestamp: str
) -> BenchResult:
    load, rpc, op_names = run.load, shape.rpc, shape.op_names
    rec, elapsed = load.recorder, load.elapsed
    ops = {
        name: rec.ops[name].summary(name, elapsed, name in _STREAMING_OPS)
        for name in op_names
        if name in rec.ops
    }
    streaming = any(name in _STREAMING_OPS for name in op_names)
    overall = load.stats(rpc, streaming)
    kept = _kept_schedule(load, shape.duration)
    warning = _rate_warning(shape.rps, shape.concurrency, overall.rps, kept)
    return BenchResult(
        rpc=rpc,
        target=shape.target,
        concurrency=shape.concurrency,
        duration_s=shape.duration,
        elapsed_s=round(elapsed, 4),
        load="open" if shape.rps else "closed",
        rps_target=shape.rps,
        channels=shape.channels,
        warmup_s=shape.warmup,
        count=overall.count,
        ok=overall.ok,
        rps=overall.rps,
        errors=overall.errors,
        p50_ms=overall.p50_ms,
        p95_ms=overall.p95_ms,
        p99_ms=overall.p99_ms,
        max_ms=overall.max_ms,
        mean_ms=overall.mean_ms,
        min_ms=overall.min_ms,
        first_item_p50_ms=overall.first_item_p50_ms,
        first_item_p99_ms=overall.first_item_p99_ms,
        ops=ops,
        options={
            "mix": shape.weights if rpc == "mixed" else None,
            "query": opts["query"],
            "mode": opts["mode"],
            "sessions": opts["sessions"],
            "seed_episodes": opts["seed_episodes"] if set(op_names) & {"search", "get"} else 0,
            "limit": opts["limit"],
            "timeout": opts["timeout"],
            "health_service": opts["health_service"],
            "seed": opts["seed"],
        },
        command=command,
        timestamp=timestamp,
        project=run.project,
        backlog=run.backlog[0],
        backlog_needs_llm=run.backlog[1],
        backlog_wait_s=run.backlog[2],
        started_rps=kept[0] if kept else None,
        start_lag_p50_ms=kept[1] if kept else None,
        start_lag_max_ms=kept[2] if kept else None,
        warnings=[warning] if warning else [],
    )


async def _drive(ctx: _Context, shape: _Shape) -> Load:
    """Makes what the ops need, then drives them."""
    seed, timeout, progress = ctx.opts["seed"], ctx.opts["timeout"], ctx.opts["progress"]
    op_names, n_channels = shape.op_names, shape.channels
    op_weights = [shape.weights[name] for name in op_names]
    await ctx.prepare(set(op_names))

    def picks(index: int) -> Pick:
        slot = index % n_channels
        fns = {name: ctx.op_function(name, slot) for name in op_names}
        if len(op_names) == 1:
            picked = (op_names[0], fns[op_names[0]])
            return lambda _rng: picked

        def pick(rng: random.Random) -> tuple[str, Call]:
            op = rng.choices(op_names, op_weights)[0]
            return op, fns[op]

        return pick

    try:
        return await drive(
            picks,
            shape.concurrency,
            shape.duration,
            warmup=shape.warmup,
            rps=shape.rps,
            seed=seed,
            # Every in-flight call has a deadline; this is a backstop for ones that don't.
            grace=(timeout or 10.0) + WATCH_WAIT_S + 5.0,
            progress=progress,
        )
    except LoadError as exc:
        raise BenchError(str(exc)) from exc


def _kept_schedule(load: Load, duration: float) -> tuple[float, float, float, int, int] | None:
    """An open loop's schedule as figures: the calls started inside the window
    a second, the median and worst start lag (ms), the calls started in time
    and those scheduled; None for a closed loop."""
    schedule = load.schedule
    if schedule is None:
        return None
    lag = sorted(schedule.lateness)
    return (
        round(schedule.started_in_window / duration, 1),
        round(percentile(lag, 50) * 1e3, 2),
        round(lag[-1] * 1e3, 2) if lag else 0.0,
        schedule.started_in_window,
        schedule.scheduled,
    )


def _rate_warning(
    rps: float | None,
    concurrency: int,
    done_rps: float,
    kept: tuple[float, float, float, int, int] | None,
) -> str | None:
    """What to say when an open loop missed its rate; None when it kept it."""
    if not rps or kept is None:
        return None
    started_rps, lag_p50_ms, lag_max_ms, started, scheduled = kept
    if started >= RATE_KEPT * scheduled:
        return None
    return (
        f"the target rate was not reached: {rps:g} rps asked, {started_rps:g} a second started"
        f" on schedule ({started} of {scheduled} calls) and {done_rps:.1f} a second finished."
        f" Calls started up to {lag_max_ms / 1e3:.1f}s late (median {lag_p50_ms / 1e3:.2f}s),"
        f" waiting for one of the {concurrency} workers (or the client's CPU), and the latencies"
        f" above include that wait: raise --concurrency, or lower --rps"
    )


# --- output -------------------------------------------------------------------------


def _aftermath(result: BenchResult) -> list[str]:
    """What the run left on the server: its project, and the jobs still queued."""
    lines: list[str] = []
    project = result.project
    if project is None:
        return lines
    held = f"{project['sessions']} sessions, {project['episodes']} episodes"
    if not project["id"]:
        lines.append(f"  left behind: {held} outside any project (the server has no projects)")
    elif project["removed"]:
        lines.append(f"  removed: project {project['id']} {project['name']!r} ({held})")
    else:
        lines.append(
            f"  kept: project {project['id']} {project['name']!r} with {held}"
            " (without --keep a run removes its project when it ends)"
        )
    if result.backlog_wait_s is not None:
        lines.append(f"  waited {result.backlog_wait_s:g}s for the backlog")
    if result.backlog:
        parts = [
            f"{kind} {n}" + (" (waits for an LLM, which is off)" if kind in result.backlog_needs_llm
                            else "")
            for kind, n in sorted(result.backlog.items())
        ]  # fmt: skip
        lines.append("  backlog the run left queued: " + ", ".join(parts))
    else:
        lines.append("  backlog the run left queued: none")
    return lines


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_result(result: BenchResult) -> str:
    """A small ghz-like table of one run."""
    load = f"open loop at {result.rps_target:g} rps" if result.load == "open" else "closed loop"
    lines = [
        f"{result.rpc} @ {result.target}: {load}, concurrency {result.concurrency}, "
        f"{result.channels} channel{'s' if result.channels != 1 else ''}, "
        f"{result.duration_s:g}s (+{result.warmup_s:g}s warmup)",
        f"  requests {result.count}  ok {result.ok}  errors {result.error_count}  "
        f"rps {result.rps:.1f}  elapsed {result.elapsed_s:.2f}s",
    ]
    header = (
        f"  {'op':<16}{'count':>9}{'rps':>10}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
        f"{'max ms':>9}{'1st p50':>9}{'1st p99':>9}"
    )
    lines.append(header)

    def row(s: OpStats | BenchResult, name: str) -> str:
        return (
            f"  {name:<16}{s.count:>9}{s.rps:>10.1f}{s.p50_ms:>9.2f}{s.p95_ms:>9.2f}"
            f"{s.p99_ms:>9.2f}{s.max_ms:>9.2f}{_ms(s.first_item_p50_ms):>9}"
            f"{_ms(s.first_item_p99_ms):>9}"
        )

    if len(result.ops) > 1:
        for name, stats in result.ops.items():
            lines.append(row(stats, name))
    lines.append(row(result, "total" if len(result.ops) > 1 else result.rpc))
    if result.errors:
        lines.append("  errors: " + ", ".join(f"{code}={n}" for code, n in result.errors.items()))
    lines.extend(f"  WARNING: {warning}" for warning in result.warnings)
    lines.extend(_aftermath(result))
    return "\n".join(lines)


# --- CLI ----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="127.0.0.1:50051", help="server HOST:PORT")
    parser.add_argument(
        "--rpc",
        default="health",
        help=f"what to drive: {', '.join(RPC_NAMES)}; comma-separate to run several in turn",
    )
    parser.add_argument("-c", "--concurrency", type=int, default=16, help="workers (16)")
    parser.add_argument(
        "-d", "--duration", type=float, default=10.0, help="measured seconds per run (10)"
    )
    parser.add_argument(
        "--rps",
        type=float,
        default=None,
        help="open loop: schedule this many requests per second (default: closed loop)",
    )
    parser.add_argument(
        "--mix", default=DEFAULT_MIX, help=f"op weights for --rpc mixed ({DEFAULT_MIX})"
    )
    parser.add_argument("--json", metavar="PATH", help="write every run's result as JSON")
    parser.add_argument(
        "--warmup", type=float, default=1.0, help="unmeasured seconds before each run (1)"
    )
    parser.add_argument(
        "--query", default=None, help="search query (default: a new random word pair per call)"
    )
    parser.add_argument(
        "--mode", choices=sorted(SEARCH_MODES), default="hybrid", help="search mode (hybrid)"
    )
    parser.add_argument(
        "--sessions", type=int, default=8, help="sessions created for episode RPCs (8)"
    )
    parser.add_argument(
        "--seed-episodes",
        type=int,
        default=32,
        help="episodes created before search/get runs (32)",
    )
    parser.add_argument("--limit", type=int, default=10, help="search hit limit (10)")
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="per-call deadline in seconds (10)"
    )
    parser.add_argument(
        "--connect-timeout", type=float, default=5.0, help="seconds to wait for the server (5)"
    )
    parser.add_argument(
        "--channels",
        type=int,
        default=None,
        help=f"channels/connections (default: one per {WORKERS_PER_CHANNEL} workers)",
    )
    parser.add_argument("--api-key", default=None, help="sent as authorization: Bearer KEY")
    parser.add_argument("--cacert", default=None, help="PEM root certificates: use TLS")
    parser.add_argument("--health-service", default="", help="service name for health checks ('')")
    parser.add_argument("--seed", type=int, default=1, help="random seed (1)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    kept = parser.add_mutually_exclusive_group()
    kept.add_argument(
        "--keep",
        action="store_true",
        help="keep the run's project (its sessions and episodes) when it ends, and name it;"
        " by default a run deletes what it made, also when it fails or is interrupted",
    )
    kept.add_argument(
        "--cleanup",
        action="store_true",
        help="delete the run's project when it ends (the default; for older command lines)",
    )
    parser.add_argument(
        "--wait-backlog",
        type=float,
        default=None,
        metavar="S",
        help="after the run, wait up to S seconds for the background jobs it queued"
        " (embeddings; extraction and summaries with an LLM) before reporting those left",
    )


async def _run_all(
    args: argparse.Namespace, rpcs: list[str], root: bytes | None
) -> list[BenchResult]:
    command = " ".join(shlex.quote(a) for a in sys.argv)
    results = []
    for rpc in rpcs:
        result = await run_bench(
            args.target,
            rpc,
            args.concurrency,
            args.duration,
            rps=args.rps,
            mix=args.mix,
            warmup=args.warmup,
            query=args.query,
            mode=args.mode,
            sessions=args.sessions,
            seed_episodes=args.seed_episodes,
            limit=args.limit,
            timeout=args.timeout,
            connect_timeout=args.connect_timeout,
            channels=args.channels,
            api_key=args.api_key,
            root_certificates=root,
            health_service=args.health_service,
            seed=args.seed,
            progress=None if args.quiet else sys.stderr,
            command=command,
            cleanup=not args.keep,
            wait_backlog=args.wait_backlog,
        )
        print(format_result(result), flush=True)
        results.append(result)
    return results


def write_json(path: str, results: Sequence[BenchResult]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump([r.to_dict() for r in results], fh, indent=2)
        fh.write("\n")


def main(args: argparse.Namespace) -> int:
    """Runs ``nexus-grpc bench``: 0 when every call succeeded, 1 when some failed,
    2 when a run could not start."""
    rpcs = [name.strip() for name in str(args.rpc).split(",") if name.strip()]
    bad = [name for name in rpcs if name not in RPC_NAMES]
    if not rpcs or bad:
        print(
            f"nexus-grpc bench: unknown --rpc {', '.join(bad) or repr(args.rpc)}; "
            f"expected {', '.join(RPC_NAMES)}",
            file=sys.stderr,
        )
        return 2
    try:
        root = None
        if args.cacert:
            with open(args.cacert, "rb") as fh:
                root = fh.read()
        results = asyncio.run(_run_all(args, rpcs, root))
    except BenchError as exc:
        print(f"nexus-grpc bench: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"nexus-grpc bench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nexus-grpc bench: interrupted", file=sys.stderr)
        return 130
    if args.json:
        try:
            write_json(args.json, results)
        except OSError as exc:
            print(f"nexus-grpc bench: cannot write {args.json}: {exc}", file=sys.stderr)
            return 2
    return 1 if any(r.error_count for r in results) else 0
