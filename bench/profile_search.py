"""Where a search's server CPU goes, thread by thread.

Seeds a database the way ``make bench`` does (run_benchmarks.seed), starts a
real server, drives each search mode at concurrency 16 for a while, and reads
every server thread's CPU from /proc before and after: the CPU per call, split
into the event loop (gRPC, asyncio, servicers, the domain), the embedder, the
SQLite reader and writer threads, the vector index thread and the rest. With
``--py-spy`` it also samples the GIL holder during the semantic run (py-spy
record --gil) and prints where the GIL is held.

    .venv/bin/python bench/profile_search.py [--episodes 20000] [--duration 10] [--py-spy]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import run_benchmarks as rb  # bench/ is this script's own directory

from nexus_grpc.loadtest.launcher import ServerProcess
from nexus_grpc.ops.against_server.bench import run_bench

GROUPS = (
    ("event loop", lambda name: name == "MainThread"),
    ("embedder", lambda name: name.startswith(("minilm", "e5"))),
    ("SQLite", lambda name: "_connection_worker_thread" in name),
    ("vector index", lambda name: name.startswith(("qdrant-edge", "edge-search"))),
    ("gRPC core", lambda name: name.startswith(("event_engine", "grpc_", "Thread-5 (_poll"))
     or "_poll_wrapper" in name),
)
OTHER = "other"


def python_thread_names(pid: int) -> dict[int, str]:
    """Native thread id -> Python thread name, from py-spy dump (Python threads all
    share the process's comm name)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    try:
        out = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names = {}
    for line in out.splitlines():
        if line.startswith("Thread ") and '"' in line:
            tid = line.split()[1]
            if tid.isdigit():
                names[int(tid)] = line.split('"')[1]
    return names


def thread_cpu(pid: int, names: dict[int, str]) -> dict[int, tuple[str, float]]:
    """tid -> (name, CPU seconds so far)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tid = int(task.name)
        out[tid] = (names.get(tid, comm), (int(fields[11]) + int(fields[12])) / tick)
    return out


def group(name: str) -> str:
    for label, test in GROUPS:
        if test(name):
            return label
    return OTHER


def profile(target: str, pid: int, scopes: list[int], duration: float, spy: bool):
    rows = {}
    for label, rpc, mode in (
        ("Health/Check", "health", ""),
        ("keyword", "search_episodes", "keyword"),
        ("semantic", "search_episodes", "semantic"),
        ("hybrid", "search_episodes", "hybrid"),
    ):
        extra = {"mode": mode, "search_session_ids": scopes} if mode else {}
        # Threads start lazily (the query embedder on the first semantic call):
        # a short unmeasured run first, then the names.
        asyncio.run(run_bench(target, rpc, 4, duration=1.0, warmup=0.0, **extra))
        names = python_thread_names(pid)
        before = thread_cpu(pid, names)
        spy_proc = None
        spy_bin = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if spy and label == "semantic" and Path(spy_bin).exists():
            spy_proc = subprocess.Popen(
                [spy_bin, "record", "--gil", "--nonblocking", "-r", "200", "-f", "raw",
                 "-d", str(int(duration)), "-p", str(pid), "-o", "/tmp/nexus-gil.txt"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        result = asyncio.run(run_bench(target, rpc, 16, duration=duration, warmup=0.0, **extra))
        after = thread_cpu(pid, names)
        if spy_proc is not None:
            spy_proc.wait(60)
        calls = max(1, result.ok)
        split: dict[str, float] = collections.defaultdict(float)
        for tid, (name, cpu) in after.items():
            split[group(name)] += cpu - before.get(tid, (name, 0.0))[1]
        rows[label] = (result.rps, {k: 1000 * v / calls for k, v in split.items()})
    return rows


def gil_summary(path: Path, top: int = 15) -> list[str]:
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        counts[stack.split(";")[-1]] += int(n)
        total += int(n)
    return [f"{100 * n / total:5.1f}%  {frame}" for frame, n in counts.most_common(top)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--py-spy", action="store_true", help="also sample the GIL holder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nexus-profile-") as tmp:
        data = Path(tmp) / "data"
        seeded = rb.seed(data, args.episodes, memory_users=10)
        server = ServerProcess(data, keep_log=False).start(timeout=120)
        try:
            server.wait_settled()
            time.sleep(1)
            rows = profile(server.target, server.pid,
                           seeded.session_scopes, args.duration, args.py_spy)
        finally:
            server.stop()
    labels = [g for g, _ in GROUPS] + [OTHER]
    print("| c=16 | req/s | " + " | ".join(labels) + " | total |")
    print("|---" * (len(labels) + 3) + "|")
    for name, (rps, split) in rows.items():
        cells = " | ".join(f"{split.get(g, 0.0):.2f}" for g in labels)
        print(f"| {name} | {rps:,.0f} | {cells} | {sum(split.values()):.2f} |")
    print("\nserver CPU ms per call, by thread")
    if args.py_spy and Path("/tmp/nexus-gil.txt").exists():
        print("\nGIL held during the semantic run (py-spy --gil, leaf frames):")
        print("\n".join(gil_summary(Path("/tmp/nexus-gil.txt"))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
