"""The per-call hot path, before and after a change, in one run: two servers side by side.

    .venv/bin/python -m bench.ab_hot_path --base REV [--new REV] [--repeats 5] [--duration 4]
                                            [--auth]

Starts ``nexus-grpc serve`` twice through the one launcher: once from ``git
archive REV`` unpacked in a temporary directory (the old code, with this
checkout's virtual environment), once from the working tree (the new code;
``--new REV`` unpacks that instead: ``--new`` the same as ``--base`` measures
the noise).
Each gets its own data directory with the same seeded session. Then, for each
repeat, it drives Health/Check, SearchEpisodes (keyword, scoped to the seeded
session) and CreateEpisode through the one load loop (``run_bench``) on one
server and then the other, swapping which goes first on every repeat, so that
a busy neighbour weighs on both. After a CreateEpisode run it waits for that
server's index queue to empty, so background indexing never overlaps a
measurement. Server CPU a call is the server process's user+system time over
the run divided by the calls (the run's set-up calls, a few, are included).

Both servers embed through the tests' Ollama stand-in (``tests/ollama_stub.py``,
in its own process, answering at once), not the offline model: on two shared
cores the model takes minutes to index what one CreateEpisode run writes, and
what is compared here is the per-call path, not the embedder.

It prints, per RPC, the median of the repeats for each server and the median
of the per-repeat ratios new ÷ old, with their range (how far the machine's
noise moved one repeat), as a markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

from nexus_grpc.client.connection import bearer_metadata, open_channel
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.loadtest.launcher import ServerProcess
from nexus_grpc.ops.against_server.bench import WORDS, run_bench

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "ab-hot-path-key-0123456789"
SEED_EPISODES = 300
#: (label, run_bench rpc, its options)
RUNS = (
    ("Health/Check", "health", {}),
    ("SearchEpisodes keyword", "search_episodes", {"mode": "keyword"}),
    ("CreateEpisode", "create_episode", {}),
)


@dataclass
class Side:
    name: str
    server: ServerProcess
    session_id: int = 0
    rps: dict[str, list[float]] = field(default_factory=dict)
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)


def start_stand_in(root: Path) -> tuple[subprocess.Popen[str], str]:
    """tests/ollama_stub.py in its own process; returns it and its URL."""
    script = root / "ollama.json"
    script.write_text(json.dumps({"embed_dim": 768}))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "ollama_stub.py"), "--port", "0",
         "--script", str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("OLLAMA_STUB_READY "):
            return proc, line.split()[1]
    raise SystemExit("the Ollama stand-in did not start")


def unpack(rev: str, into: Path) -> str:
    """``git archive rev`` into ``into``; returns the full commit id."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return commit


async def seed(side: Side, api_key: str | None) -> None:
    """One session of ``SEED_EPISODES`` episodes, indexed before anything is measured."""
    metadata = bearer_metadata(api_key) or None
    rng = random.Random(7)
    async with open_channel(side.server.target, retry=None) as channel:
        stub = memory_grpc.MemoryServiceStub(channel)
        session = await stub.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session(name="ab hot path")),
            metadata=metadata, timeout=10,
        )  # fmt: skip
        side.session_id = session.id
        for i in range(SEED_EPISODES):
            await stub.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(
                    session_id=session.id,
                    user_message=" ".join(rng.choices(WORDS, k=30)),
                    ai_response=" ".join(rng.choices(WORDS, k=30)),
                    request_id=f"ab-seed-{i}",
                ),
                metadata=metadata, timeout=10,
            )  # fmt: skip
    await drained(side, api_key)


async def measure(
    side: Side, label: str, rpc: str, options: dict, args: argparse.Namespace, api_key: str | None
) -> None:
    extra = dict(options)
    if rpc == "search_episodes":
        extra["search_session_ids"] = [side.session_id]
    before = side.server.cpu_seconds()
    result = await run_bench(
        side.server.target, rpc, args.concurrency, args.duration,
        api_key=api_key, seed=len(side.rps.get(label, ())) + 1, **extra,
    )  # fmt: skip
    spent = side.server.cpu_seconds() - before
    if result.error_count:
        raise SystemExit(f"{side.name} {label}: calls failed: {result.errors}")
    side.rps.setdefault(label, []).append(result.rps)
    side.cpu_ms.setdefault(label, []).append(1000 * spent / result.count)
    print(f"  {side.name:>3} {label:<24} {result.rps:8.0f} req/s  "
          f"{1000 * spent / result.count:6.3f} ms CPU a call", file=sys.stderr)  # fmt: skip
    if rpc == "create_episode":
        await drained(side, api_key)


async def drained(side: Side, api_key: str | None) -> None:
    """Until the server's index queue is empty (``wait_queue_empty``, with the key)."""
    metadata = bearer_metadata(api_key) or None
    deadline = time.monotonic() + 600
    async with open_channel(side.server.target, retry=None) as channel:
        stub = memory_grpc.MemoryServiceStub(channel)
        while True:
            status = await stub.GetServiceStatus(
                memory_pb2.GetServiceStatusRequest(), metadata=metadata, timeout=10
            )
            if not {q.kind: q.pending for q in status.queues}.get("index:episodes", 0):
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"{side.name}: the index queue did not empty in 600 s")
            await asyncio.sleep(0.2)


def paired(new: list[float], old: list[float]) -> str:
    """The median of the per-repeat ratios new ÷ old, and their range: the noise."""
    ratios = sorted(n / o for n, o in zip(new, old, strict=True))
    return f"{statistics.median(ratios):.3f} ({ratios[0]:.2f}–{ratios[-1]:.2f})"


def table(old: Side, new: Side) -> list[str]:
    lines = [
        "| RPC (c=16) | req/s old | req/s new | new ÷ old | CPU ms a call old | new | new ÷ old |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, _rpc, _options in RUNS:
        lines.append(
            f"| {label} | {statistics.median(old.rps[label]):,.0f}"
            f" | {statistics.median(new.rps[label]):,.0f}"
            f" | {paired(new.rps[label], old.rps[label])}"
            f" | {statistics.median(old.cpu_ms[label]):.3f}"
            f" | {statistics.median(new.cpu_ms[label]):.3f}"
            f" | {paired(new.cpu_ms[label], old.cpu_ms[label])} |"
        )
    return lines


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="ab-hot-path-") as tmp:
        root = Path(tmp)
        commit = unpack(args.base, root / "old")
        stand_in, url = start_stand_in(root)
        flags = ["--vector-prewarm-mb", "0", "--embedder", "ollama", "--ollama-url", url]
        api_key = None
        if args.auth:
            keys = root / "keys.json"
            keys.write_text(json.dumps({"keys": [{"key": API_KEY, "name": "ab", "users": "*"}]}))
            flags += ["--auth-keys-file", str(keys)]
            api_key = API_KEY
        old = Side("old", ServerProcess(
            root / "old-data", *flags, cwd=root / "old", keep_log=False,
            env={"PYTHONPATH": str(root / "old")},
        ))  # fmt: skip
        new_tree = ROOT
        if args.new:
            new_tree = root / "new"
            unpack(args.new, new_tree)
        new = Side("new", ServerProcess(
            root / "new-data", *flags, cwd=new_tree, keep_log=False,
            env={"PYTHONPATH": str(new_tree)},
        ))  # fmt: skip
        try:
            for side in (old, new):
                side.server.start(timeout=120)
                side.server.wait_settled()
                await seed(side, api_key)
            # One unmeasured pass each: imports, caches and connections warm.
            for side in (old, new):
                for label, rpc, options in RUNS:
                    await measure(side, label, rpc, options, args, api_key)
                side.rps.clear()
                side.cpu_ms.clear()
            started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            for r in range(args.repeats):
                print(f"repeat {r + 1} of {args.repeats}", file=sys.stderr)
                order = (old, new) if r % 2 == 0 else (new, old)
                for label, rpc, options in RUNS:
                    for side in order:
                        await measure(side, label, rpc, options, args, api_key)
        finally:
            for side in (old, new):
                side.server.kill()
            stand_in.kill()
            stand_in.wait()
    print(f"old: {args.base} ({commit[:10]}); new: {args.new or 'the working tree'};"
          f" {args.repeats} repeats of"
          f" {args.duration:g} s at c={args.concurrency}, alternating; started {started}"
          f"{'; with --auth-keys-file' if args.auth else ''}")  # fmt: skip
    print("\n".join(table(old, new)))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the old revision (git rev)")
    parser.add_argument("--new", help="the new revision (default: the working tree)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds a run")
    parser.add_argument("-c", "--concurrency", type=int, default=16)
    parser.add_argument(
        "--auth", action="store_true", help="both servers with a key file: auth on the path too"
    )
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
