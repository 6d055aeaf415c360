"""Keyword search's SQL, two versions side by side on one seeded database.

Loads ``store/sqlite/keyword_search.py`` from another checkout (``--before``,
a ``git worktree add`` of an earlier commit) beside this checkout's, and
times both on the same connection, alternating query by query, for each
scope shape ``make bench`` searches: a session in a project of 20 sessions,
the whole large project (1,000 sessions), a small session outside any
project, and one user's memories. The store call alone: no gRPC, no
pipeline, the CPU of the calling thread (so other work on the host weighs
less than on a wall clock). Both versions get the same words (the bench's
query pairs, less the scope's common words, as the pipeline drops them).

    .venv/bin/python bench/keyword_ab.py --before /tmp/before --episodes 20000
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import run_benchmarks as rb  # bench/ is this script's own directory

from nexus_grpc.core.models import MemoryScope
from nexus_grpc.domain.retrieval.common_terms import SAMPLE_SIZE, common_words
from nexus_grpc.domain.retrieval.keyword_query import match_expression
from nexus_grpc.ops.against_server.bench import WORDS
from nexus_grpc.store import memories
from nexus_grpc.store.memory_visibility_sql import sql_where
from nexus_grpc.store.sqlite import keyword_search
from nexus_grpc.store.sqlite.connection import connect


def load(tree: Path) -> ModuleType:
    path = tree / "nexus_grpc" / "store" / "sqlite" / "keyword_search.py"
    spec = importlib.util.spec_from_file_location("keyword_search_before", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", type=Path, help="a data directory seeded earlier (reused)")
    args = parser.parse_args()
    before = load(args.before)
    with tempfile.TemporaryDirectory(prefix="nexus-kw-") as tmp:
        data = args.data or Path(tmp)
        if not (data / "nexus.sqlite3").exists():
            rb.seed(data, args.episodes, memory_users=10)
        conn = connect(data / "nexus.sqlite3", isolation_level=None)
        run(conn, before, args.queries)
    return 0


def run(conn: Any, before: ModuleType, n: int) -> None:
    big = conn.execute("SELECT MAX(project_id) FROM sessions").fetchone()[0]
    scopes = {
        "session in a project (20 sessions)": [
            r[0] for r in conn.execute("SELECT id FROM sessions WHERE project_id = 3")
        ],
        "whole large project (1,000 sessions)": [
            r[0] for r in conn.execute("SELECT id FROM sessions WHERE project_id = ?", (big,))
        ],
        "small session outside projects": [
            conn.execute("SELECT MIN(id) FROM sessions WHERE project_id IS NULL").fetchone()[0]
        ],
    }
    rng = random.Random(11)
    texts = [" ".join(rng.sample(WORDS, 2)) for _ in range(n)]
    versions = {"before": before, "after": keyword_search}
    rows = []
    conn.execute("BEGIN")
    for name, sessions in scopes.items():
        common = common_words(keyword_search.episode_scope_sample(conn, sessions, SAMPLE_SIZE))
        matches = [m for m in (match_expression(t, drop=common) for t in texts) if m]
        calls = {
            label: (lambda m, mod=mod, s=sessions: mod.episode_keyword_search(conn, m, s, 10))
            for label, mod in versions.items()
        }
        rows.append((f"SearchEpisodes keyword, {name}", time_both(calls, matches)))
    scope = MemoryScope(project_id=1, user_id="user3")
    where, params = sql_where(scope)
    common = common_words(memories.MemoryRows(conn).scope_sample(scope, SAMPLE_SIZE))
    asks = [f"what does the user enjoy, {a} or {b}?" for a, b in (t.split() for t in texts)]
    matches = [m for m in (match_expression(t, drop=common) for t in asks) if m]
    calls = {
        label: (
            lambda m, mod=mod: mod.memory_keyword_search(conn, m, 1, "user3", where, params, 10)
        )
        for label, mod in versions.items()
    }
    rows.append(("SearchMemories keyword, one user of 1,000 memories", time_both(calls, matches)))
    conn.execute("COMMIT")
    print(
        "| search (store call only) | before p50 / p99 ms | after p50 / p99 ms"
        " | after ÷ before (p50) |"
    )
    print("|---|---|---|---|")
    for name, (b, a) in rows:
        ratio = statistics.median(a) / statistics.median(b)
        print(
            f"| {name} | {statistics.median(b):.3f} / {percentile(b, 99):.3f}"
            f" | {statistics.median(a):.3f} / {percentile(a, 99):.3f} | {ratio:.2f} |"
        )


def time_both(
    calls: dict[str, Callable[[str], object]], matches: list[str]
) -> tuple[list[float], list[float]]:
    """Each query by both versions in turn (the order alternating), thread CPU ms."""
    for m in matches[:5]:
        for call in calls.values():
            call(m)
    spent: dict[str, list[float]] = {label: [] for label in calls}
    for i, m in enumerate(matches):
        order = list(calls) if i % 2 == 0 else list(reversed(calls))
        for label in order:
            start = time.thread_time()
            calls[label](m)
            spent[label].append((time.thread_time() - start) * 1000)
    return spent["before"], spent["after"]


if __name__ == "__main__":
    sys.exit(main())
