"""What tenants taking turns costs a claim, and what its tenant costs an enqueue.

    .venv/bin/python -m bench.job_claims [--backlog 10000] [--claims 50] [--append FILE]

On SQLite and on PostgreSQL (the embedded server of tests/pg.py), each a
fresh database: one tenant's import of ``--backlog`` episodes with a bulk
extraction job each, beside a number of other tenants with enough jobs each to
have some due through every claim timed.
Each figure is the median of ``--claims`` claims in a row, each in its own
transaction (each takes jobs the one before did not); what is timed is the
claim's statements, not the commit. Then every job is pending again (and, on
PostgreSQL, the table vacuumed, as autovacuum would) for the next figure.
The same claims run again with main's claim (``ORDER BY priority, run_after,
id``, copied here) on main's indexes (idx_jobs_priority and idx_jobs_claim,
store/schema.RETIRED_INDEXES, instead of idx_jobs_lanes), so the two figures
come from one database and one run.

The enqueue figure: ``--backlog`` extraction jobs queued 256 at a time, as an
import does, with the tenant read from each target (store/jobs.enqueue) and
with main's statement, which wrote none.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from nexus_grpc.core.models import NewEpisode
from nexus_grpc.store import jobs
from nexus_grpc.store.postgres.database import PostgresDatabase
from nexus_grpc.store.sql import now
from nexus_grpc.store.sqlite.database import Database

# main's claims (before tenants took turns), for the comparison.
MAIN_SQLITE_CLAIM = (
    "SELECT j.id FROM jobs j"
    " WHERE j.kind = ? AND j.state = 'pending' AND j.run_after <= ?"
    " AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.kind = j.kind"
    " AND r.target_id = j.target_id AND r.state = 'running')"
    " ORDER BY j.priority, j.run_after, j.id LIMIT ?"
)
_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"
MAIN_PG_CLAIM = (
    "WITH picked AS ("
    " SELECT j.id FROM jobs j WHERE j.kind = ?"
    f" AND ((j.state = 'pending' AND j.run_after <= {_NOW})"
    f"  OR (j.state = 'running' AND j.lease_until < {_NOW}))"
    " AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.kind = j.kind"
    f" AND r.target_id = j.target_id AND r.state = 'running' AND r.lease_until >= {_NOW})"
    " ORDER BY j.priority, j.run_after, j.id LIMIT ? FOR UPDATE OF j SKIP LOCKED)"
    " UPDATE jobs SET state = 'running', lease_until = "
    f"{_NOW} + 60, updated_at = {_NOW} FROM picked WHERE jobs.id = picked.id RETURNING jobs.id"
)
MAIN_ENQUEUE = (
    "INSERT INTO jobs (kind, target_id, run_after, created_at, updated_at, priority)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kind, target_id) WHERE state = 'pending'"
    " DO UPDATE SET priority = excluded.priority"
)
TENANTS = (1, 10, 100)
BATCHES = (1, 32)
# Claims before each figure's timed ones (caches).
WARM_UP = 5
# Claims before the first figure of each claim: psycopg prepares a statement on
# a pooled connection after its fifth run there (planning the claim costs more
# than running it), and the pool holds 8 (store/postgres.py).
PREPARE = 8 * 6


def main_claim(conn: Any, postgres: bool, limit: int) -> None:
    if postgres:
        conn.execute(MAIN_PG_CLAIM, (jobs.EXTRACT_EPISODE, limit)).fetchall()
        return
    rows = conn.execute(MAIN_SQLITE_CLAIM, (jobs.EXTRACT_EPISODE, now(), limit)).fetchall()
    conn.executemany("UPDATE jobs SET state = 'running' WHERE id = ?", [(r[0],) for r in rows])


async def timed(db: Any, claim: Any, claims: int, vacuum: Any) -> float:
    """Milliseconds a claim's statements took (the median of ``claims`` claims, each
    in a transaction of its own (committed: a claim's dead index entries are
    what the next one walks past, as in service); a busy shared machine
    disturbs the median less than the mean. Then every job is pending
    again, and on PostgreSQL vacuumed, for the next figure."""
    spent: list[float] = []

    def one(conn: Any) -> None:
        started = time.perf_counter()
        claim(conn)
        spent.append(time.perf_counter() - started)

    for _ in range(WARM_UP):
        await db.write_sql(claim)
    for _ in range(claims):
        await db.write_sql(one)
    await db.write_sql(
        lambda c: c.execute("UPDATE jobs SET state = 'pending' WHERE state = 'running'")
    )
    vacuum()
    return statistics.median(spent) * 1000


async def episodes_of(db: Any, tenant: str, n: int) -> list[int]:
    def write(uow: Any) -> list[int]:
        session = uow.sessions.insert(f"s-{tenant}", "", 0, {}, tenant)
        return uow.episodes.insert_many(
            [NewEpisode(session.id, f"{tenant} {i}", "", {}, None) for i in range(n)]
        )

    return await db.write(write)


async def measure(
    db: Any, postgres: bool, backlog: int, claims: int, vacuum: Any
) -> dict[str, Any]:
    importer = await episodes_of(db, "importer", backlog)
    # Enough for every other tenant to have due jobs through every timed claim
    # (tenants take turns: with 10 tenants, each gives a tenth of the jobs).
    each = (WARM_UP + claims) * max(BATCHES) // min(t for t in TENANTS if t > 1) + 1
    others = [await episodes_of(db, f"t{i}", each) for i in range(1, max(TENANTS))]

    async def enqueue(ids: list[int], main: bool) -> float:
        def write(conn: Any) -> None:
            ts = now()
            for start in range(0, len(ids), 256):
                chunk = ids[start : start + 256]
                if main:
                    conn.executemany(
                        MAIN_ENQUEUE,
                        [(jobs.EXTRACT_EPISODE, t, ts, ts, ts, jobs.BULK) for t in chunk],
                    )
                else:
                    jobs.SqlJobs(conn).enqueue(jobs.EXTRACT_EPISODE, chunk, priority=jobs.BULK)

        started = time.perf_counter()
        await db.write_sql(write)
        return (time.perf_counter() - started) * 1000

    result: dict[str, Any] = {}
    # Queue, drop, queue again: the second of each is timed (warm caches).
    for main in (True, False, True, False):
        spent = await enqueue(importer, main)
        result["enqueue main" if main else "enqueue"] = spent
        await db.write_sql(lambda c: c.execute("DELETE FROM jobs"))
    await db.write_sql(
        lambda c: jobs.SqlJobs(c).enqueue(jobs.EXTRACT_EPISODE, importer, priority=jobs.BULK)
    )
    await timed(
        db, lambda c: jobs.SqlJobs(c).claim(jobs.EXTRACT_EPISODE, 1, served=[]), PREPARE, vacuum
    )
    queued_others = 0
    for tenants in TENANTS:
        for ids in others[queued_others : tenants - 1]:
            await db.write_sql(
                lambda c, ids=ids: jobs.SqlJobs(c).enqueue(
                    jobs.EXTRACT_EPISODE, ids, priority=jobs.BULK
                )
            )
        queued_others = tenants - 1
        for batch in BATCHES:
            result[("turns", tenants, batch)] = await timed(
                db,
                lambda c, b=batch: jobs.SqlJobs(c).claim(
                    jobs.EXTRACT_EPISODE, b, served=["importer"]
                ),
                claims,
                vacuum,
            )
    result["pending"] = await db.write_sql(
        lambda c: int(c.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
    )
    # main's claim on main's indexes, over the same backlog (all tenants queued).
    await db.write_sql(
        lambda c: (
            c.execute("DROP INDEX idx_jobs_lanes"),
            c.execute(
                "CREATE INDEX idx_jobs_priority ON jobs(kind, priority, run_after, id)"
                " WHERE state = 'pending'"
            ),
            c.execute(
                "CREATE INDEX idx_jobs_claim ON jobs(kind, run_after, id) WHERE state = 'pending'"
            ),
        )
    )
    vacuum()
    await timed(db, lambda c: main_claim(c, postgres, 1), PREPARE, vacuum)
    for batch in BATCHES:
        result[("main", max(TENANTS), batch)] = await timed(
            db, lambda c, b=batch: main_claim(c, postgres, b), claims, vacuum
        )
    return result


async def run(kind: str, root: Path, backlog: int, claims: int) -> dict[str, Any]:
    vacuum: Any = lambda: None  # noqa: E731 - SQLite: nothing to do
    if kind == "sqlite":
        db: Any = Database(root / "claims.db")
    else:
        import psycopg

        from tests import pg

        url = pg.new_database()
        db = PostgresDatabase(url)

        def vacuum() -> None:
            # What autovacuum does in service, done at once so each figure
            # starts from the same table.
            with psycopg.connect(url, autocommit=True) as raw:
                raw.execute("VACUUM ANALYZE jobs")

    await db.open()
    try:
        return await measure(db, kind == "postgresql", backlog, claims, vacuum)
    finally:
        await db.close()


def table(results: dict[str, dict[str, Any]], backlog: int) -> str:
    lines = [
        "| claim | tenants with due jobs | batch | SQLite ms a claim | PostgreSQL ms a claim |",
        "|---|---|---|---|---|",
    ]
    keys = [("turns", t, b) for t in TENANTS for b in BATCHES]
    keys += [("main", max(TENANTS), b) for b in BATCHES]
    for key in keys:
        what, tenants, batch = key
        name = "tenants in turn" if what == "turns" else "main's (priority, due time)"
        cells = " | ".join(f"{results[k][key]:.3f}" for k in ("sqlite", "postgresql"))
        lines.append(f"| {name} | {tenants} | {batch} | {cells} |")
    lines.append("")
    lines.append(
        f"{results['sqlite']['pending']:,} jobs pending in all."
        f" Queueing {backlog:,} extraction jobs 256 at a time (ms, all of them):"
        f" SQLite {results['sqlite']['enqueue']:.0f} with each target's tenant read,"
        f" {results['sqlite']['enqueue main']:.0f} with main's statement;"
        f" PostgreSQL {results['postgresql']['enqueue']:.0f} and"
        f" {results['postgresql']['enqueue main']:.0f}."
    )
    return "\n".join(lines) + "\n"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=10_000, help="the importer's jobs")
    parser.add_argument("--claims", type=int, default=50, help="claims timed per figure")
    parser.add_argument(
        "--append", type=Path, help="also append the figures to this Markdown report"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nexus-claims-bench-") as tmp:
        results = {
            kind: await run(kind, Path(tmp), args.backlog, args.claims)
            for kind in ("sqlite", "postgresql")
        }
    report = table(results, args.backlog)
    print(f"cpus: {os.cpu_count()}")
    print(report)
    if args.append is not None:
        with args.append.open("a") as out:
            out.write(
                "\n## Tenants take turns: the cost of a claim (issue 37, item 5)\n\n"
                "From `.venv/bin/python -m bench.job_claims"
                f" --backlog {args.backlog} --claims {args.claims}` (run by `make bench`):"
                f" one tenant's {args.backlog:,} bulk extraction jobs beside other tenants'"
                " (enough for each to have jobs due throughout); each figure is the median"
                " of that many claims, each in its own transaction, its statements without"
                " the commit.\n\n" + report
            )


if __name__ == "__main__":
    asyncio.run(main())
