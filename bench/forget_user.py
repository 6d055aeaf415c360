"""Forgetting a user: how long ForgetUser takes to be DONE (every row gone and
the disk scrubbed), and what it costs the other users' searches meanwhile.

One fresh ``nexus-grpc serve`` with its defaults (the real embedder, SQLite,
qdrant-edge). One project of ``--episodes`` episodes: ``--user-episodes`` of
them alice's, in sessions of 1,000, the rest spread over other users'
sessions, each written by ImportEpisodes; alice also holds
``--user-memories`` USER memories. Once every episode and memory is indexed,
the other users' hybrid searches (SearchEpisodes from their sessions, over
the project; ``--concurrency`` callers back to back) run for ``--baseline``
seconds without an erasure, then again while ForgetUser(alice) runs, until
WatchErasure says DONE. Reported: the erasure's wall time and its receipt's
counts, and the searches' p50 and p99 in both runs (with their ratio).

    .venv/bin/python -m bench.forget_user [--episodes 100000] [--user-episodes 10000]
        [--user-memories 1000] [--concurrency 4] [--baseline 20] [--append docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path

from nexus_grpc.client.connection import open_channel
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.loadtest.launcher import ServerProcess
from nexus_grpc.loadtest.loop import percentile

SESSION_SIZE = 1000
IMPORT_BATCH = 10_000
TOPICS = ("deployment", "billing", "latency", "onboarding", "backups", "pricing", "search")


def _episode(session_id: int, user: str, i: int) -> memory_pb2.ImportEpisodesRequest:
    topic = TOPICS[i % len(TOPICS)]
    return memory_pb2.ImportEpisodesRequest(
        episode=memory_pb2.CreateEpisodeRequest(
            session_id=session_id,
            user_message=f"{user} asks about the {topic} plan, item {i}",
            ai_response=f"For {topic} item {i} we agreed on step {i % 13} first.",
            request_id=f"{user}-{i}",
        )
    )


async def _seed(stub, project_id: int, user: str, episodes: int) -> list[int]:
    sessions: list[int] = []
    pending: list[memory_pb2.ImportEpisodesRequest] = []
    for i in range(episodes):
        if i % SESSION_SIZE == 0:
            session = await stub.CreateSession(
                memory_pb2.CreateSessionRequest(
                    session=memory_pb2.Session(project_id=project_id, user_id=user)
                )
            )
            sessions.append(session.id)
        pending.append(_episode(sessions[-1], user, i))
        if len(pending) == IMPORT_BATCH:
            await stub.ImportEpisodes(iter(pending))
            pending = []
    if pending:
        await stub.ImportEpisodes(iter(pending))
    return sessions


async def _indexed(stub) -> None:
    while True:
        status = await stub.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
        if all(q.pending == 0 for q in status.queues if q.kind.startswith("index:")):
            return
        await asyncio.sleep(1.0)


async def _searches(
    stub, sessions: list[int], concurrency: int, stop: asyncio.Event
) -> list[float]:
    latencies: list[float] = []

    async def worker(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            topic = rng.choice(TOPICS)
            started = time.perf_counter()
            async for _ in stub.SearchEpisodes(
                memory_pb2.SearchEpisodesRequest(
                    query=f"what did we agree on {topic}",
                    session_id=rng.choice(sessions),
                    limit=10,
                )
            ):
                pass
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return sorted(latencies)


async def run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="nexus-forget-bench-") as tmp:
        server = ServerProcess(Path(tmp) / "data", keep_log=False)
        await asyncio.to_thread(server.start)
        try:
            channel = open_channel(server.target, retry=None)
            stub = memory_grpc.MemoryServiceStub(channel)
            await channel.channel_ready()
            project = await stub.CreateProject(
                memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="forget-bench"))
            )
            started = time.perf_counter()
            await _seed(stub, project.id, "alice", args.user_episodes)
            others: list[int] = []
            rest = args.episodes - args.user_episodes
            users = max(1, rest // SESSION_SIZE)
            for n in range(users):
                share = rest // users + (1 if n < rest % users else 0)
                others += await _seed(stub, project.id, f"user{n}", share)
            for i in range(args.user_memories):
                await stub.CreateMemory(
                    memory_pb2.CreateMemoryRequest(
                        memory=memory_pb2.Memory(
                            kind=memory_pb2.MEMORY_KIND_USER,
                            user_id="alice",
                            project_id=project.id,
                            title=f"preference {i}",
                            content=f"Alice prefers option {i} for the {TOPICS[i % 7]} plan.",
                        )
                    )
                )
            await _indexed(stub)
            seeded = time.perf_counter() - started

            stop = asyncio.Event()
            baseline = asyncio.create_task(_searches(stub, others, args.concurrency, stop))
            await asyncio.sleep(args.baseline)
            stop.set()
            quiet = await baseline

            stop = asyncio.Event()
            during = asyncio.create_task(_searches(stub, others, args.concurrency, stop))
            began = time.perf_counter()
            started_erasure = await stub.ForgetUser(memory_pb2.ForgetUserRequest(user_id="alice"))
            erasure = started_erasure
            watch = memory_pb2.WatchErasureRequest(id=started_erasure.id)
            async for erasure in stub.WatchErasure(watch):
                if erasure.state == memory_pb2.ERASURE_STATE_DONE:
                    break
            took = time.perf_counter() - began
            stop.set()
            busy = await during
            await channel.close()
        except BaseException:
            print("\n".join(server.log[-60:]))
            raise
        finally:
            await asyncio.to_thread(server.stop)
    counts = {f.name: v for f, v in erasure.counts.ListFields()}
    return {
        "episodes": args.episodes,
        "user_episodes": args.user_episodes,
        "user_memories": args.user_memories,
        "concurrency": args.concurrency,
        "seed_seconds": round(seeded, 1),
        "erasure_seconds": round(took, 2),
        "receipt": counts,
        "baseline": _stats(quiet),
        "during": _stats(busy),
    }


def _stats(latencies: list[float]) -> dict:
    return {
        "searches": len(latencies),
        "p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
    }


def markdown(r: dict, command: str) -> str:
    b, d = r["baseline"], r["during"]

    def times(x: float, y: float) -> str:
        return f"{x / y:.2f}x" if y else "-"

    rc = r["receipt"]
    return "\n".join(
        [
            "",
            "## Forgetting a user",
            "",
            f"`{command}`: a project of {r['episodes']:,} episodes, {r['user_episodes']:,} of"
            f" them alice's with {r['user_memories']:,} USER memories; ForgetUser(alice) until"
            f" WatchErasure says DONE (every row gone, the FTS5 indexes merged, the WAL"
            f" truncated, qdrant-edge compacted), while {r['concurrency']} other users search"
            " back to back (hybrid SearchEpisodes over the project).",
            "",
            f"- Time to DONE: **{r['erasure_seconds']} s** ({rc.get('episodes', 0):,} episodes,"
            f" {rc.get('sessions', 0)} sessions, {rc.get('memories', 0):,} memories,"
            f" {rc.get('vectors', 0):,} points, {rc.get('jobs_cancelled', 0):,} jobs cancelled).",
            "",
            "| other users' searches | searches | p50 | p99 |",
            "|---|---|---|---|",
            f"| without an erasure | {b['searches']} | {b['p50_ms']} ms | {b['p99_ms']} ms |",
            f"| while it runs | {d['searches']} | {d['p50_ms']} ms | {d['p99_ms']} ms |",
            f"| ratio | | {times(d['p50_ms'], b['p50_ms'])} | {times(d['p99_ms'], b['p99_ms'])} |",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--user-episodes", type=int, default=10_000)
    parser.add_argument("--user-memories", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--baseline", type=float, default=20.0, help="seconds of searches alone")
    parser.add_argument("--append", type=Path, help="append the markdown to this file")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    command = (
        f".venv/bin/python -m bench.forget_user --episodes {args.episodes}"
        f" --user-episodes {args.user_episodes} --user-memories {args.user_memories}"
        f" --concurrency {args.concurrency}"
    )
    print(json.dumps(result, indent=2) if args.json else markdown(result, command))
    if args.append:
        with args.append.open("a") as out:
            out.write(markdown(result, command))


if __name__ == "__main__":
    main()
