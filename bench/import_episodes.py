"""Episodes per second from one caller: unary CreateEpisode against ImportEpisodes.

Each mode runs against its own fresh server process (``nexus-grpc serve`` with
its defaults: the real embedder, synchronous=FULL), so neither inherits the
other's indexing backlog. The unary caller sends one CreateEpisode at a time
(each waits for the one before, as a single importing script would); the
import sends every episode on one ImportEpisodes stream. The figure is the
rate at which episodes became durable (the answer came), not indexed.

    .venv/bin/python -m bench.import_episodes [--unary 1000] [--imported 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client.connection import open_channel
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.loadtest.launcher import ServerProcess

# 8 May 2023, 13:56 UTC; turns 30 s apart, as an imported conversation's.
BASE = 1_683_554_160


def episode(session_id: int, i: int) -> memory_pb2.CreateEpisodeRequest:
    when = Timestamp(seconds=BASE + 30 * i)
    return memory_pb2.CreateEpisodeRequest(
        session_id=session_id,
        user_message=f"Turn {i}: what did we decide about the deployment on day {i % 31}?",
        ai_response=f"On day {i % 31} we agreed to roll out region {i % 7} first, then the rest.",
        request_id=f"bench-{i}",
        occur_time=when,
    )


async def measure(mode: str, n: int) -> float:
    with tempfile.TemporaryDirectory(prefix="nexus-import-bench-") as tmp:
        server = ServerProcess(Path(tmp) / "data", keep_log=False)
        await asyncio.to_thread(server.start)
        try:
            channel = open_channel(server.target, retry=None)
            stub = memory_grpc.MemoryServiceStub(channel)
            await channel.channel_ready()
            session = await stub.CreateSession(memory_pb2.CreateSessionRequest())
            # One call first, so connection set-up is not timed.
            await stub.CreateEpisode(episode(session.id, -1))
            started = time.perf_counter()
            if mode == "unary":
                for i in range(n):
                    await stub.CreateEpisode(episode(session.id, i))
            else:
                answer = await stub.ImportEpisodes(
                    memory_pb2.ImportEpisodesRequest(episode=episode(session.id, i))
                    for i in range(n)
                )
                assert answer.created == n and not answer.errors, answer.errors[:3]
            elapsed = time.perf_counter() - started
            await channel.close()
        finally:
            await asyncio.to_thread(server.stop)
    return n / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unary", type=int, default=1000, help="CreateEpisode calls")
    parser.add_argument("--imported", type=int, default=10_000, help="episodes imported")
    parser.add_argument(
        "--append", type=Path, help="also append the figures to this Markdown report"
    )
    args = parser.parse_args()
    unary = await measure("unary", args.unary)
    imported = await measure("import", args.imported)
    print(f"cpus: {os.cpu_count()}")
    print(f"unary CreateEpisode, one caller: {args.unary} episodes, {unary:,.0f} episodes/s")
    print(f"ImportEpisodes, one stream:      {args.imported} episodes, {imported:,.0f} episodes/s")
    print(f"ratio: {imported / unary:.1f}x")
    if args.append is not None:
        with args.append.open("a") as report:
            report.write(
                "\n## Bulk import (issue 15)\n\n"
                "From `.venv/bin/python -m bench.import_episodes"
                f" --unary {args.unary} --imported {args.imported}` (run by `make bench`),"
                " each mode against its own fresh server with the defaults: episodes a second"
                " from one caller until the answer came (durable, not yet indexed).\n\n"
                "| mode | episodes | episodes/s |\n|---|---|---|\n"
                f"| CreateEpisode, one at a time | {args.unary} | {unary:,.0f} |\n"
                f"| ImportEpisodes, one stream | {args.imported} | {imported:,.0f} |\n\n"
                f"ImportEpisodes ÷ CreateEpisode: **{imported / unary:.1f}×** (target ≥ 5×).\n"
            )


if __name__ == "__main__":
    asyncio.run(main())
