"""Server variants side by side: the same RPCs against each, alternating, per-thread CPU.

A variant is a name, a code tree and serve flags: ``NAME=TREE`` or
``NAME=TREE:--flag value ...``, TREE being ``main`` (this checkout) or the path
of another checkout (a ``git worktree add`` of an earlier commit), served with
its own code on PYTHONPATH. Every variant serves its own copy of one seeded data
directory (``--episodes``, the layout ``make bench`` seeds; 0: an empty one),
and each round runs every variant once, so host noise falls on all of them
alike. For each RPC: calls a second, server CPU a call split by thread (as
bench/profile_search.py does), and for create_episode its share of Health/Check.

Examples (docs/benchmarks.md quotes both):

    # the query-vector cache on and off
    .venv/bin/python bench/ab_servers.py --episodes 20000 --rpcs keyword,semantic,hybrid \\
        on=main 'off=main:--query-vector-cache 0'
    # CreateEpisode across commits, on empty data directories
    git worktree add /tmp/old fad3a6c
    .venv/bin/python bench/ab_servers.py --episodes 0 --rpcs health,create_episode \\
        --concurrency 64 --duration 6 old=/tmp/old main=main
    # Every search row across commits (episodes, memories, entities)
    .venv/bin/python bench/ab_servers.py --episodes 20000 \\
        --rpcs keyword,semantic,hybrid,memories_keyword,memories_default,entities \\
        old=/tmp/old main=main

    # What explain adds to each search, against the same server without it
    .venv/bin/python bench/ab_servers.py --episodes 20000 \\
        --rpcs hybrid,hybrid+explain,memories_default,memories_default+explain,\\
        entities,entities+explain main=main

Across a schema change, seed with the oldest tree (``--seed-tree``): an
older server refuses a database newer than it knows, and a newer one upgrades
its copy on start, so every variant serves the same rows.

    .venv/bin/python bench/ab_servers.py --episodes 20000 --seed-tree /tmp/old \
        --rpcs keyword,semantic,hybrid old=/tmp/old main=main

A ``+explain`` row asks every hit's explanation (issue 37's ``explain``); a
tree whose protos lack the field ignores it, so the row is its plain search.
memories_*: SearchMemories in that mode for one of ten users of a seeded
project (run_benchmarks' question); entities: SearchEntities naming one of
the seeded graph's entities.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import profile_search as ps  # bench/ is this script's own directory
import run_benchmarks as rb

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.loadtest.launcher import ServerProcess, wait_queue_empty
from nexus_grpc.ops.against_server.bench import run_bench

SEARCH_MODES = ("keyword", "semantic", "hybrid")
MEMORY_MODES = {f"memories_{m}": m for m in rb.EPISODE_MODES}
#: A search named with this suffix asks for each hit's explanation (the
#: SearchEpisodes row is then driven as memories and entities are).
EXPLAIN = "+explain"
#: ab_servers seeds this many users of rb.MEMORIES_PER_USER memories each.
MEMORY_USERS = 10


def _entity_search(graph: graph_grpc.GraphServiceStub, explain: bool = False):
    async def search(rng) -> None:
        request = graph_pb2.SearchEntitiesRequest(
            query=f"who is entity {rng.randrange(rb.ENTITIES)}?", project_id=rb.GRAPH_PROJECT,
            limit=10, explain=explain)
        async for _ in graph.SearchEntities(request):
            pass
    return search


async def _closed(target: str, pid: int, rpc: str, concurrency: int, duration: float,
                  scopes: list[int]) -> tuple[dict[str, float], dict[str, float]]:
    """req/s and latency, and server CPU ms a call by thread group, for the searches
    nexus_grpc.ops.against_server.bench does not drive (memories, entities, and any search
    with ``+explain``)."""
    rpc, explain = rpc.removesuffix(EXPLAIN), rpc.endswith(EXPLAIN)
    async with grpc.aio.insecure_channel(target) as channel:
        memory = memory_grpc.MemoryServiceStub(channel)
        if rpc in MEMORY_MODES:
            call = rb._memory_search(memory, rb.EPISODE_MODES[MEMORY_MODES[rpc]], MEMORY_USERS,
                                     explain=explain)
        elif rpc in SEARCH_MODES:
            mode = memory_pb2.SearchMode.Value(f"SEARCH_MODE_{rpc.upper()}")
            call = rb._episode_search(memory, mode, sessions=scopes, explain=explain)
        else:
            call = _entity_search(graph_grpc.GraphServiceStub(channel), explain)
        await rb.closed_loop(call, 4, 1.0)
        names = ps.python_thread_names(pid)
        before = ps.thread_cpu(pid, names)
        figures = await rb.closed_loop(call, concurrency, duration)
        after = ps.thread_cpu(pid, names)
    split: dict[str, float] = collections.defaultdict(float)
    for tid, (thread, cpu) in after.items():
        split[ps.group(thread)] += cpu - before.get(tid, (thread, 0.0))[1]
    calls = max(1, int(figures["count"]))
    return figures, {k: 1000 * v / calls for k, v in split.items()}


def seed_with(tree: str, seed_dir: Path, episodes: int) -> list[int]:
    """Seed with ``tree``'s own code (its schema), in a subprocess; the
    session scopes the episode searches use."""
    if tree == "main":
        return rb.seed(seed_dir, episodes, memory_users=MEMORY_USERS).session_scopes
    root = Path(tree).resolve()
    code = (
        "import json, sys; from pathlib import Path; import run_benchmarks as rb;"
        f" s = rb.seed(Path(sys.argv[1]), {episodes}, memory_users={MEMORY_USERS});"
        " print(json.dumps(s.session_scopes))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(seed_dir)], cwd=root / "bench", check=True,
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)},
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def parse_variant(text: str) -> tuple[str, str, list[str]]:
    name, _, rest = text.partition("=")
    tree, _, flags = rest.partition(":")
    if not name or not tree:
        raise SystemExit(f"a variant is NAME=TREE[:FLAGS], got {text!r}")
    return name, tree, shlex.split(flags)


def run_one(target: str, pid: int, rpc: str, concurrency: int, duration: float,
            scopes: list[int]) -> tuple[dict[str, float], dict[str, float]]:
    """req/s and latency (client-side p50 and p99, ms), and server CPU ms a
    call by thread group."""
    if rpc in MEMORY_MODES or rpc == "entities" or rpc.endswith(EXPLAIN):
        return asyncio.run(_closed(target, pid, rpc, concurrency, duration, scopes))
    if rpc in SEARCH_MODES:
        name, extra = "search_episodes", {"mode": rpc, "search_session_ids": scopes}
    else:
        name, extra = rpc, {}
    asyncio.run(run_bench(target, name, 4, duration=1.0, warmup=0.0, **extra))
    names = ps.python_thread_names(pid)
    before = ps.thread_cpu(pid, names)
    result = asyncio.run(run_bench(target, name, concurrency, duration=duration, warmup=0.0,
                                   **extra))
    after = ps.thread_cpu(pid, names)
    split: dict[str, float] = collections.defaultdict(float)
    for tid, (thread, cpu) in after.items():
        split[ps.group(thread)] += cpu - before.get(tid, (thread, 0.0))[1]
    calls = max(1, result.ok)
    figures = {"rps": result.rps, "p50": result.p50_ms, "p99": result.p99_ms}
    return figures, {k: 1000 * v / calls for k, v in split.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", help="NAME=TREE[:FLAGS]")
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--rpcs", default="keyword,semantic,hybrid",
                        help="comma-separated: health, create_episode, keyword, semantic, hybrid,"
                        " memories_keyword, memories_semantic, memories_default, entities;"
                        " a search with +explain asks each hit's explanation")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed-tree", default="main",
                        help="the tree whose code seeds the data (the oldest, across a"
                             " schema change)")
    args = parser.parse_args()
    variants = [parse_variant(v) for v in args.variants]
    rpcs = args.rpcs.split(",")
    with tempfile.TemporaryDirectory(prefix="nexus-ab-") as tmp:
        seed_dir = Path(tmp) / "seed"
        scopes: list[int] = []
        if args.episodes:
            scopes = seed_with(args.seed_tree, seed_dir, args.episodes)
        for rnd in range(args.rounds):
            for name, tree, flags in variants:
                data = Path(tmp) / f"{name}-{rnd}"
                if args.episodes:
                    shutil.copytree(seed_dir, data)
                env = {} if tree == "main" else {"PYTHONPATH": str(Path(tree).resolve())}
                # `python -m` puts its working directory first on sys.path, ahead
                # of PYTHONPATH: started from this checkout, every variant would
                # serve this checkout's code. Each starts in its own tree.
                cwd = None if tree == "main" else Path(tree).resolve()
                server = ServerProcess(data, *flags, env=env, cwd=cwd, keep_log=False).start(
                    timeout=120
                )
                try:
                    server.wait_settled()
                    # A schema change may queue the index again (a newer tree
                    # upgrading the older tree's seed): nothing is measured
                    # while it re-embeds.
                    for queue in ("index:episodes", "index:memories", "index:entities"):
                        asyncio.run(wait_queue_empty(server.target, queue, timeout=1800))
                    time.sleep(1)
                    rates = {}
                    for rpc in rpcs:
                        figures, split = run_one(server.target, server.pid, rpc,
                                                 args.concurrency, args.duration, scopes)
                        rps = rates[rpc] = figures["rps"]
                        parts = " ".join(f"{k}={v:.2f}" for k, v in sorted(split.items()))
                        share = ""
                        if rpc == "create_episode" and rates.get("health"):
                            share = f" ({100 * rps / rates['health']:.0f} % of Health/Check)"
                        print(f"round {rnd} {name} {rpc}: {rps:,.0f}/s{share}, p50"
                              f" {figures['p50']:.2f} ms, p99 {figures['p99']:.2f} ms; server CPU"
                              f" ms a call {sum(split.values()):.2f}: {parts}", flush=True)
                finally:
                    server.stop()
                shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
