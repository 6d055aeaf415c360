"""The indexes the store's hot statements rely on, read from the databases'
own query plans, on both stores: a budget's spend (every tenant's today:
idx_llm_calls_day; one tenant's: idx_llm_calls_tenant; one user's share:
idx_llm_calls_user), a claim's walk of the job lanes (idx_jobs_lanes), and
the same-words check of a memory's owner (texts_of_owner: the owner's own
index). A statement that stops using its index (a declaration that lost it,
a rewrite that hides a column from the planner) still answers right, only
slowly: only its plan tells.

Each statement is the one the store's function sends (recorded as it runs),
explained with its parameters over a spread of rows like a server's: several
tenants, users, days, projects. PostgreSQL plans by statistics, so its
tables are analysed and sequential scans set aside (a few thousand rows are
cheap to read whole; the question is which index the planner takes when it
takes one). SQLite plans without statistics (the server runs no ANALYZE).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.llm_usage import LLMCall
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.store.postgres.database import PostgresDatabase
from nexus_grpc.store.sqlite.database import Database
from nexus_grpc.store.unit_of_work import SqlUnitOfWork

DAY = 86_400.0
TENANTS = ("t1", "t2", "t3")
USERS = ("alice", "bob", "carol", "dan")


class Recorder:
    """A connection that keeps each statement sent through it, with its
    parameters, and passes everything else to the connection it wraps."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.statements: list[tuple[str, Any]] = []

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.statements.append((sql, params))
        return self._conn.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _seed(uow: Any, now: float) -> None:
    uow.usage.insert(
        [
            LLMCall(
                "extraction",
                1 + i % 5,
                tenant,
                100,
                10,
                0.5,
                "ok",
                now - day * DAY - i,
                user_id=USERS[i % len(USERS)],
            )  # fmt: skip
            for tenant in TENANTS
            for day in range(10)
            for i in range(25)
        ]
    )
    for tenant in TENANTS:
        for p in range(8):
            project = uow.projects.insert({"name": f"{tenant}-p{p}"}, tenant)
            session = uow.sessions.insert(f"{tenant}-s{p}", "", project.id, {}, tenant, "alice")
            episodes = [
                uow.episodes.insert(session.id, f"hi {i}", "", {}, None).id for i in range(10)
            ]
            uow.jobs.enqueue(jobs.EXTRACT_EPISODE, episodes, run_after=now - 60)
            for i in range(12):
                for kind, user in ((MemoryKind.PROJECT, ""), (MemoryKind.USER, USERS[i % 4])):
                    uow.memories.insert(
                        {
                            "kind": int(kind),
                            "title": f"m{i}",
                            "content": f"memory {i} of {p}",
                            "tier": int(Tier.LONGTERM),
                            "project_id": project.id,
                            "agent_id": "",
                            "user_id": user,
                            "session_id": 0,
                            "confidence": 1.0,
                            "metadata": {},
                        },
                        None,
                        tenant,
                    )


@pytest.fixture(params=["sqlite", "postgresql"])
async def plans(request, tmp_path):
    """``plans(call)``: the statements ``call(uow)`` sends, in one
    transaction over the seeded rows, each with its plan as text."""
    postgres = request.param == "postgresql"
    db: Any = (
        PostgresDatabase(request.getfixturevalue("pg_url"))
        if postgres
        else Database(tmp_path / "plans.sqlite3")
    )
    await db.open()
    now = time.time()
    await db.write(lambda uow: _seed(uow, now))
    if postgres:
        await db.write(lambda uow: uow.conn.execute("ANALYZE"))

    async def explain(call: Callable[[Any], Any]) -> list[tuple[str, str]]:
        def case(uow: Any) -> list[tuple[str, str]]:
            recorder = Recorder(uow.conn)
            call(SqlUnitOfWork(recorder))
            out = []
            if postgres:
                uow.conn.execute("SET LOCAL enable_seqscan = off")
            for sql, params in recorder.statements:
                if "pg_advisory_xact_lock" in sql:
                    continue
                if postgres:
                    rows = uow.conn.execute("EXPLAIN " + sql, params).fetchall()
                    out.append((sql, "\n".join(r[0] for r in rows)))
                else:
                    rows = uow.conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
                    out.append((sql, "\n".join(r[3] for r in rows)))
            return out

        return await db.write(case)

    try:
        yield explain
    finally:
        await db.close()


def _uses(plan: str, index: str) -> bool:
    """SQLite's "USING [COVERING] INDEX name", PostgreSQL's "Index [Only]
    Scan using name", "Bitmap Index Scan on name"."""
    return re.search(rf"(INDEX|using|Scan on) {index}\b", plan) is not None


async def test_every_tenants_spend_today_walks_the_day_index(plans):
    [(_, plan)] = await plans(lambda uow: uow.usage.spent(time.time() - DAY))
    assert _uses(plan, "idx_llm_calls_day"), plan


async def test_one_tenants_spend_today_walks_the_tenant_index(plans):
    [(_, plan)] = await plans(lambda uow: uow.usage.spent(time.time() - DAY, ["t1"]))
    assert _uses(plan, "idx_llm_calls_tenant"), plan


async def test_a_users_spend_today_walks_the_user_index(plans):
    [(_, plan)] = await plans(
        lambda uow: uow.usage.spent_by_users(time.time() - DAY, "t1", ["alice"])
    )
    assert _uses(plan, "idx_llm_calls_user"), plan


async def test_every_users_spend_today_reads_only_todays_rows_of_the_tenant(plans):
    # Not the user index, which would be walked over every day the tenant
    # ever spent: today's range of the tenant's.
    [(_, plan)] = await plans(lambda uow: uow.usage.spent_by_users(time.time() - DAY, "t1"))
    assert _uses(plan, "idx_llm_calls_tenant"), plan


async def test_a_claim_walks_the_job_lanes(plans):
    sent = await plans(lambda uow: uow.jobs.claim(jobs.EXTRACT_EPISODE, 4, 60.0))
    [walk] = [plan for sql, plan in sent if "WITH RECURSIVE" in sql]
    assert _uses(walk, "idx_jobs_lanes"), walk
    # Each lane's due jobs are found in it, not by a scan of the table.
    assert "SCAN jobs" not in walk and "Seq Scan on jobs" not in walk, walk


# The owner's own rows: a PROJECT memory's project (never the walk of every
# PROJECT memory of the tenant under user ''), a USER memory's user. SQLite
# plans by rule, so its choice is exact; PostgreSQL by its statistics, which
# may prefer the project's memories of that kind.
OWNERS = {
    (MemoryKind.PROJECT, "sqlite"): {"idx_memories_project"},
    (MemoryKind.PROJECT, "postgresql"): {"idx_memories_project", "idx_memories_kind_project"},
    (MemoryKind.USER, "sqlite"): {"idx_memories_tenant_user"},
    (MemoryKind.USER, "postgresql"): {"idx_memories_tenant_user", "idx_memories_kind_project"},
}


@pytest.mark.parametrize(("kind", "user"), [(MemoryKind.PROJECT, ""), (MemoryKind.USER, "alice")])
async def test_the_same_words_check_walks_the_owners_own_index(plans, request, kind, user):
    [(_, plan)] = await plans(
        lambda uow: uow.memories.texts_of_owner(
            kind=int(kind),
            project_id=2,
            agent_id="",
            user_id=user,
            tier=int(Tier.LONGTERM),
            session_id=None,
            tenant="t1",
            containing=["memory"],
        )
    )
    store = request.node.callspec.params["plans"]
    assert any(_uses(plan, index) for index in OWNERS[kind, store]), plan
