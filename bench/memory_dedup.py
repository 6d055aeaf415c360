"""What CreateMemory's same-words check costs (issue 40): a create reads its
owner's live memories in the tier before it stores, so the cost grows with
how many the owner holds (at most the cap, 1000, outside ARCHIVE).

One ``nexus-grpc serve`` process (its defaults: the real embedder,
synchronous=FULL); one caller creates memories one after another for one
owner (a project's LONGTERM tier), each with new words, and the latency of
each create is recorded by how many the owner held before it. A last round
sends facts already held: the answer is the memory already there, nothing is
written.

    .venv/bin/python -m bench.memory_dedup [--memories 1000] [--append docs/benchmarks.md]

``--server-tree DIR`` serves another checkout (``git archive REV`` unpacked):
the same load against the code before the check, for a before/after.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import grpc

from nexus_grpc.client.connection import open_channel
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.loadtest.launcher import ServerProcess

SAMPLE = 50  # creates timed at each size


def fact(project_id: int, i: int) -> memory_pb2.CreateMemoryRequest:
    return memory_pb2.CreateMemoryRequest(
        memory=memory_pb2.Memory(
            kind=memory_pb2.MEMORY_KIND_PROJECT,
            project_id=project_id,
            tier=memory_pb2.TIER_LONGTERM,
            title=f"Fact {i}",
            content=f"Service {i} listens on port {10_000 + i} in region {i % 7}.",
        )
    )


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(0.95 * (len(values) - 1))]
    return f"{statistics.median(values) * 1000:.2f} / {p95 * 1000:.2f}"


async def measure(memories: int, tree: Path | None) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="nexus-dedup-bench-") as tmp:
        # python -m puts the working directory first on sys.path: that tree is served.
        server = ServerProcess(Path(tmp) / "data", keep_log=False, cwd=tree)
        await asyncio.to_thread(server.start)
        try:
            channel = open_channel(server.target, retry=None)
            stub = memory_grpc.MemoryServiceStub(channel)
            project = await stub.CreateProject(
                memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="dedup bench"))
            )
            marks = sorted({0, memories // 2, memories - SAMPLE})
            held = 0
            for mark in marks:
                while held < mark:  # fill up to the mark, untimed
                    await stub.CreateMemory(fact(project.id, held))
                    held += 1
                times = []
                for _ in range(SAMPLE):
                    started = time.perf_counter()
                    await stub.CreateMemory(fact(project.id, held))
                    times.append(time.perf_counter() - started)
                    held += 1
                rows.append((f"new words, owner holding {mark}-{mark + SAMPLE}", ms(times)))
            times = []
            try:
                for i in range(SAMPLE):
                    started = time.perf_counter()
                    await stub.CreateMemory(fact(project.id, i * (held // SAMPLE)))
                    times.append(time.perf_counter() - started)
                rows.append((f"words already held, owner holding {held}", ms(times)))
            except grpc.aio.AioRpcError as exc:
                # A server without the check stores them again, up to the cap.
                rows.append((f"words already held, owner holding {held}", exc.code().name))
            await channel.close()
        finally:
            await asyncio.to_thread(server.stop)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000, help="owner's memories at the end")
    parser.add_argument(
        "--append", type=Path, help="also append the figures to this Markdown report"
    )
    parser.add_argument("--server-tree", type=Path, help="serve this checkout instead")
    args = parser.parse_args()
    rows = asyncio.run(measure(args.memories, args.server_tree))
    table = ["| CreateMemory, one caller | p50 / p95 ms |", "|---|---|"]
    table += [f"| {what} | {figures} |" for what, figures in rows]
    print("\n".join(table))
    if args.append is not None:
        with args.append.open("a") as report:
            report.write(
                "\n## CreateMemory's same-words check (issue 40)\n\n"
                f"`.venv/bin/python -m bench.memory_dedup --memories {args.memories}`\n\n"
                + "\n".join(table)
                + "\n"
            )


if __name__ == "__main__":
    main()
