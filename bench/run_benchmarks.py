"""``make bench``: seed a database, start a real server, measure, write docs/benchmarks.md.

Every figure is measured in one run against the same server, and each speed is
also reported as a ratio to grpc.health.v1 Check (the cheapest RPC the server
answers), because these machines are shared and noisy.

Seeding: episodes are written straight into SQLite (FTS5 triggers index them)
and their vectors straight into the embedded index.  Embedding 100,000
episodes with the offline model would take ~15 minutes on 2 cores, so the
seeded vectors are random unit vectors; every *query* is embedded by the real
model, so the measured search path is the production path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nexus_grpc.bench import format_result, run_bench  # noqa: E402
from nexus_grpc.store.migrations import migrate  # noqa: E402
from nexus_grpc.vectors import EdgeVectorIndex, VectorPoint  # noqa: E402

WORDS = (
    "postgres kubernetes deploy latency budget invoice python rust grpc cache index vector "
    "summary project meeting design review incident outage backup restore schema migration "
    "token model prompt embedding cluster replica shard queue worker retry timeout socket "
    "browser mobile release roadmap customer pricing contract security audit password login"
).split()
EPISODES_PER_SESSION = 50
SESSIONS_PER_PROJECT = 20


def seed(data_dir: Path, episodes: int) -> list[int]:
    """Returns the ids of sessions that belong to projects (the search scopes)."""
    rng = random.Random(7)
    db_path = data_dir / "nexus.sqlite3"
    data_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    migrate(conn)
    conn.execute("PRAGMA synchronous=OFF")
    now = time.time()
    sessions = max(1, episodes // EPISODES_PER_SESSION)
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('embedding_model', 'all-MiniLM-L6-v2-onnx-int8:384')"
    )
    for p in range(sessions // SESSIONS_PER_PROJECT + 1):
        conn.execute(
            "INSERT INTO projects (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (p + 1, f"project {p}", now, now),
        )
    session_rows = []
    for s in range(sessions):
        project = s // SESSIONS_PER_PROJECT + 1
        session_rows.append((s + 1, f"00000000-0000-4000-8000-{s + 1:012d}", project, now))
    conn.executemany(
        "INSERT INTO sessions (id, external_id, project_id, created_at) VALUES (?, ?, ?, ?)",
        session_rows,
    )
    rows = []
    for e in range(episodes):
        user = " ".join(rng.choices(WORDS, k=24))
        ai = " ".join(rng.choices(WORDS, k=30))
        rows.append((e + 1, e // EPISODES_PER_SESSION + 1, user, ai, now, 2, 2))
    conn.executemany(
        "INSERT INTO episodes (id, session_id, user_message, ai_response, created_at,"
        " embed_state, extract_state) VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.execute("COMMIT")
    conn.close()

    async def vectors() -> None:
        index = EdgeVectorIndex(data_dir / "vectors")
        await index.ensure_collection("episodes", 384, {"sessionId": "integer"})
        gen = np.random.default_rng(7)
        for start in range(0, episodes, 5000):
            n = min(5000, episodes - start)
            vecs = gen.standard_normal((n, 384)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            await index.upsert("episodes", [
                VectorPoint(start + i + 1, vecs[i].tolist(),
                            {"sessionId": (start + i) // EPISODES_PER_SESSION + 1, "createdAt": 0})
                for i in range(n)
            ])
        await index.close()

    asyncio.run(vectors())
    return [s[0] for s in session_rows[: SESSIONS_PER_PROJECT * 5]]


class Server:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.startup_s = 0.0

    def start(self) -> None:
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nexus_grpc.cli", "serve", "--listen", "127.0.0.1:0",
             "--data-dir", str(self.data_dir)],
            stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, "NEXUS_LOG_LEVEL": "INFO"},  # the port line is INFO
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.proc and self.proc.stderr
            for line in self.proc.stderr:
                found = re.search(r"serving on \S+ \(port (\d+)\)", line)
                if found:
                    self.port = int(found.group(1))
                    self.startup_s = time.perf_counter() - started
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(120) or not self.port:
            raise SystemExit("server did not start")

    def rss_mb(self) -> float:
        assert self.proc
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)


async def measure(target: str, duration: float, scopes: list[int]) -> list:
    results = []
    common = {"duration": duration, "warmup": 1.0, "progress": sys.stderr}
    runs = [
        ("health", 64, {}),
        ("create_episode", 64, {}),
        ("health", 16, {}),
        ("search_episodes", 16, {"mode": "keyword", "search_session_ids": scopes}),
        ("search_episodes", 16, {"mode": "semantic", "search_session_ids": scopes}),
        ("search_episodes", 16, {"mode": "hybrid", "search_session_ids": scopes}),
    ]
    for rpc, conc, extra in runs:
        result = await run_bench(target, rpc, conc, **common, **extra)
        print(format_result(result), file=sys.stderr)
        results.append((rpc, conc, extra.get("mode", ""), result))
    return results


def write_report(path: Path, args, episodes: int, server: Server, results, rss_mb: float,
                 seed_s: float) -> None:
    cmd = f"make bench BENCH_EPISODES={episodes} BENCH_DURATION={args.duration:g}"
    by = {(r, c, m): res for r, c, m, res in results}
    h64, h16 = by[("health", 64, "")], by[("health", 16, "")]
    lines = [
        "# Benchmarks",
        "",
        "Produced by `bench/run_benchmarks.py`; every figure below comes from one run of:",
        "",
        f"```sh\n{cmd}\n```",
        "",
        f"- Machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; shared and noisy,"
        " so compare ratios within a run.",
        f"- Database: {episodes:,} episodes in {episodes // EPISODES_PER_SESSION:,} sessions,"
        f" {SESSIONS_PER_PROJECT} sessions per project (seeded in {seed_s:.0f} s; vectors are"
        " random unit vectors, queries are embedded by the real offline model).",
        "- Searches are scoped to a session in a project: scope = 1,000 episodes of the"
        f" {episodes:,}.",
        f"- Run at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| what | concurrency | req/s | p50 ms | p95 ms | p99 ms | errors | vs Health/Check |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rpc, conc, mode, res in results:
        base = h64 if conc == 64 else h16
        name = rpc + (f" ({mode})" if mode else "")
        ratio = res.rps / base.rps if base.rps else 0
        lines.append(
            f"| {name} | {conc} | {res.rps:,.0f} | {res.p50_ms:.1f} | {res.p95_ms:.1f} |"
            f" {res.p99_ms:.1f} | {res.error_count} | {ratio:.0%} |"
        )
    lines += [
        "",
        f"- Start-up on {episodes:,} episodes (process start to serving):"
        f" {server.startup_s:.2f} s.",
        f"- Server RSS after the runs: {rss_mb:.0f} MB.",
    ]
    for rpc, _conc, mode, res in results:
        if res.first_item_p50_ms is not None:
            lines.append(
                f"- {rpc} ({mode}): first hit p50 {res.first_item_p50_ms:.1f} ms vs whole stream"
                f" p50 {res.p50_ms:.1f} ms."
            )
    path.write_text("\n".join(lines) + "\n")
    json_path = path.with_suffix(".json")
    json_path.write_text(json.dumps([r.to_dict() for *_, r in results], indent=1, default=str))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int,
                        default=int(os.environ.get("BENCH_EPISODES", "100000")))
    parser.add_argument("--duration", type=float,
                        default=float(os.environ.get("BENCH_DURATION", "10")))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nexus-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        started = time.perf_counter()
        scopes = seed(data_dir, args.episodes)
        seed_s = time.perf_counter() - started
        print(f"seeded {args.episodes} episodes in {seed_s:.1f}s", file=sys.stderr)
        server = Server(data_dir)
        server.start()
        try:
            results = asyncio.run(measure(f"127.0.0.1:{server.port}", args.duration, scopes))
            rss = server.rss_mb()
        finally:
            server.stop()
        write_report(args.out, args, args.episodes, server, results, rss, seed_s)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
