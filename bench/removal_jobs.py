"""What queueing a removal's index jobs from the domain costs, against the
store's ``INSERT ... SELECT`` it replaced (issue 48, item 2).

    .venv/bin/python -m bench.removal_jobs [--episodes 200] [--sessions 200] [--runs 30]
        [--append FILE]

On SQLite and on PostgreSQL (the embedded server of tests/pg.py), each a
fresh database holding, in one tenant:

- "DeleteSession": a session outside any project with ``--episodes``
  episodes, 3 summaries, 20 entities of its own graph and 10 TASK-tier
  memories (what DeleteSession's last statement takes, its episodes
  included: the index jobs of all of them).
- "an erasure's sessions step": ``--sessions`` sessions (an erasure's chunk)
  whose episodes are gone already, each with 2 summaries, 5 own-graph
  entities and 5 TASK-tier memories.

Timed, in one transaction each, is queueing those rows' index jobs only (not
the deletes, which did not change): now, the domain's read
(``sessions.removal_targets``) and its ``jobs.enqueue`` calls
(domain/erasure.drop_points); main's, the four ``INSERT ... SELECT``
statements (``jobs.SqlJobs.enqueue_select``) of main's ``sessions.delete`` and
``ErasureStore.delete_sessions``. The jobs are dropped in the same
transaction, so every run starts from an empty queue. The two ways take
turns (main, now, main, now...), and each figure is the median of
``--runs``, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from nexus_grpc.core.models import MemoryKind, NewEpisode, Tier
from nexus_grpc.domain import erasure
from nexus_grpc.store import dialect, jobs
from nexus_grpc.store.postgres.database import PostgresDatabase
from nexus_grpc.store.sqlite.database import Database

TENANT = "bench"


def _memory(session_id: int) -> dict[str, Any]:
    return {
        "kind": int(MemoryKind.USER), "title": "t", "content": "remember this",
        "tier": int(Tier.TASK), "project_id": 0, "agent_id": "", "user_id": "ann",
        "session_id": session_id, "confidence": 0.9, "metadata": {},
    }  # fmt: skip


def seed(uow: Any, name: str, episodes: int, summaries: int, entities: int, memories: int) -> int:
    session = uow.sessions.insert(name, "", 0, {}, TENANT, user_id="ann").id
    uow.episodes.insert_many(
        [NewEpisode(session, f"turn {i} of {name}", "ok", {}, None) for i in range(episodes)]
    )
    for i in range(summaries):
        uow.summaries.insert(session_id=session, project_id=0, content=f"summary {i}")
    for i in range(entities):
        uow.graph.insert_entity((0, session), f"{name} thing {i}", "thing", None, source="manual")
    for _ in range(memories):
        uow.memories.insert(_memory(session), None, TENANT)
    return session


def main_way(conn: Any, session_ids: list[int]) -> None:
    """main's statements: the index jobs queued by INSERT ... SELECT."""
    members = (json.dumps(session_ids),)
    within = f"IN (SELECT value FROM {dialect.json_ints(conn)})"
    for kind, select in (
        (jobs.INDEX_EPISODE, f"SELECT id FROM episodes WHERE session_id {within}"),
        (jobs.INDEX_SUMMARY, f"SELECT id FROM summaries WHERE session_id {within}"),
        (
            jobs.INDEX_ENTITY,
            f"SELECT id FROM entities WHERE project_id = 0 AND session_id {within}",
        ),
        (jobs.INDEX_MEMORY, f"SELECT id FROM memories WHERE tier = 1 AND session_id {within}"),
    ):
        jobs.SqlJobs(conn).enqueue_select(kind, select, members)


def domain_way(uow: Any, session_ids: list[int]) -> None:
    erasure.drop_points(uow, uow.sessions.removal_targets(session_ids))


async def timed(db: Any, session_ids: list[int], runs: int) -> dict[str, Any]:
    spent: dict[str, list[float]] = {"main": [], "now": []}
    queued: dict[str, int] = {}

    def once(uow: Any, way: str) -> None:
        started = time.perf_counter()
        if way == "main":
            main_way(uow.conn, session_ids)
        else:
            domain_way(uow, session_ids)
        spent[way].append((time.perf_counter() - started) * 1000)
        queued[way] = int(uow.conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
        uow.conn.execute("DELETE FROM jobs")

    for _ in range(3):  # warm-up: caches, and psycopg's prepared statements
        for way in ("main", "now"):
            await db.write(lambda uow, way=way: once(uow, way))
    spent = {"main": [], "now": []}
    for _ in range(runs):
        for way in ("main", "now"):
            await db.write(lambda uow, way=way: once(uow, way))
    assert queued["main"] == queued["now"], queued
    return {
        "jobs": queued["now"],
        "main": statistics.median(spent["main"]),
        "now": statistics.median(spent["now"]),
    }


async def measure(db: Any, episodes: int, sessions: int, runs: int) -> dict[str, Any]:
    one = await db.write(lambda uow: seed(uow, "deleted", episodes, 3, 20, 10))
    chunk = await db.write(
        lambda uow: [seed(uow, f"erased {i}", 0, 2, 5, 5) for i in range(sessions)]
    )
    return {
        "DeleteSession": await timed(db, [one], runs),
        "an erasure's sessions step": await timed(db, chunk, runs),
    }


async def run(kind: str, root: Path, episodes: int, sessions: int, runs: int) -> dict[str, Any]:
    if kind == "sqlite":
        db: Any = Database(root / "removals.db")
    else:
        from tests import pg

        db = PostgresDatabase(pg.new_database())
    await db.open()
    try:
        return await measure(db, episodes, sessions, runs)
    finally:
        await db.close()


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| removal | store | index jobs | main's INSERT ... SELECT (ms)"
        " | domain's read + enqueue (ms) | ratio |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    for removal in ("DeleteSession", "an erasure's sessions step"):
        for store in ("sqlite", "postgresql"):
            r = results[store][removal]
            lines.append(
                f"| {removal} | {store} | {r['jobs']:,} | {r['main']:.2f} | {r['now']:.2f}"
                f" | {r['now'] / r['main']:.2f}x |"
            )
    return "\n".join(lines) + "\n"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200, help="the deleted session's")
    parser.add_argument("--sessions", type=int, default=200, help="an erasure step's sessions")
    parser.add_argument("--runs", type=int, default=30, help="runs timed per figure")
    parser.add_argument(
        "--append", type=Path, help="also append the figures to this Markdown report"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nexus-removal-bench-") as tmp:
        results = {
            kind: await run(kind, Path(tmp), args.episodes, args.sessions, args.runs)
            for kind in ("sqlite", "postgresql")
        }
    report = table(results)
    print(f"cpus: {os.cpu_count()}")
    print(report)
    if args.append is not None:
        with args.append.open("a") as out:
            out.write(
                "\n## A removal's index jobs, queued by the domain (issue 48, item 2)\n\n"
                "From `.venv/bin/python -m bench.removal_jobs"
                f" --episodes {args.episodes} --sessions {args.sessions} --runs {args.runs}`"
                " (run by `make bench`): queueing the index jobs of what a removal takes,"
                " the domain's read and `jobs.enqueue` against main's `INSERT ... SELECT`,"
                " each the median of that many transactions, main's and the domain's taking"
                " turns; the deletes themselves are not timed (they did not change).\n\n" + report
            )


if __name__ == "__main__":
    asyncio.run(main())
