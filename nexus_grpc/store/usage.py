"""The LLM's account: one ``llm_calls`` row per request to the model server,
and what budgets read from it and do to the jobs of a tenant past one.

Rows are written in the transaction that keeps the call's result (the job's
outcome, a summary, a selection's usage), so a result that survives a crash
has its calls beside it. They keep the project's id and the tenant by value,
with no foreign key: what a deleted project spent was still spent, and its
tenant's totals must not shrink.
"""

from __future__ import annotations

from collections.abc import Sequence

from nexus_grpc.core import jobs as kinds
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.llm_usage import ActivityBucket, LLMCall, StageBucket
from nexus_grpc.core.storage import Connection
from nexus_grpc.store import dialect
from nexus_grpc.store.sql import now, placeholders

#: Jobs a budget holds at once: one sweep is one short write, never a
#: backlog-long one on SQLite's single writer (a claim finds the rest).
DEFER_SWEEP = 1000

# Where each LLM job's target finds its tenant: an episode through its
# session, a session itself, an entity its own column. Kinds not here never
# call the LLM, and no budget holds them.
_TARGET_TENANT = {
    kinds.EXTRACT_EPISODE: "SELECT e.id, s.tenant FROM episodes e"
    " JOIN sessions s ON s.id = e.session_id WHERE e.id IN ({ids})",
    kinds.FORM_MEMORIES: "SELECT e.id, s.tenant FROM episodes e"
    " JOIN sessions s ON s.id = e.session_id WHERE e.id IN ({ids})",
    kinds.SUMMARIZE_SESSION: "SELECT id, tenant FROM sessions WHERE id IN ({ids})",
    kinds.RESOLVE_ENTITY: "SELECT id, tenant FROM entities WHERE id IN ({ids})",
}
_JOBS_OF_TENANT = {
    kinds.EXTRACT_EPISODE: "JOIN episodes t ON t.id = j.target_id"
    " JOIN sessions s ON s.id = t.session_id WHERE s.tenant = ?",
    kinds.FORM_MEMORIES: "JOIN episodes t ON t.id = j.target_id"
    " JOIN sessions s ON s.id = t.session_id WHERE s.tenant = ?",
    kinds.SUMMARIZE_SESSION: "JOIN sessions s ON s.id = j.target_id WHERE s.tenant = ?",
    kinds.RESOLVE_ENTITY: "JOIN entities s ON s.id = j.target_id WHERE s.tenant = ?",
}


def insert(conn: Connection, calls: Sequence[LLMCall]) -> None:
    if not calls:
        return
    conn.executemany(
        "INSERT INTO llm_calls (at, tenant, project_id, stage, outcome, prompt_tokens,"
        " completion_tokens, seconds, estimated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                c.at,
                c.tenant,
                c.project_id,
                c.stage,
                c.outcome,
                c.prompt_tokens,
                c.completion_tokens,
                c.seconds,
                1 if c.estimated else 0,
            )
            for c in calls
        ],
    )


def spent(conn: Connection, since: float, tenants: Sequence[str] | None = None) -> dict[str, int]:
    """Tokens (both ways) each tenant's calls spent since ``since``: the named
    tenants (0 for one that spent nothing), or every tenant that spent any."""
    where = "at >= ?"
    params: list[float | str] = [since]
    if tenants is not None:
        if not tenants:
            return {}
        where += f" AND tenant IN ({placeholders(len(tenants))})"
        params += list(tenants)
    # Grouped by an expression, not the column: grouping by the column lets
    # SQLite walk the tenant index over every day ever recorded, for its
    # order, instead of the day index over today's rows.
    rows = conn.execute(
        "SELECT tenant || '' AS owner, SUM(prompt_tokens + completion_tokens) FROM llm_calls"
        f" WHERE {where} GROUP BY owner",
        params,
    ).fetchall()
    found = {str(r[0]): int(r[1] or 0) for r in rows}
    if tenants is None:
        return found
    return {t: found.get(t, 0) for t in tenants}


def _bucket(conn: Connection, column: str) -> str:
    """The bucket a time falls in: whole bucket lengths since the epoch (UTC
    hours and days start on those multiples)."""
    return dialect.of(conn).whole_times(column)


def stage_buckets(
    conn: Connection,
    start: float,
    end: float,
    bucket_seconds: float,
    *,
    tenant: str | None = None,
    project_id: int | None = None,
) -> list[StageBucket]:
    """Calls in [start, end) of one project, or of one tenant, by time bucket,
    stage and outcome."""
    where, scope = _scope(tenant, project_id)
    bucket = _bucket(conn, "at")
    rows = conn.execute(
        f"SELECT {bucket} AS b, stage, outcome, COUNT(*), SUM(prompt_tokens),"
        " SUM(completion_tokens), SUM(seconds), SUM(estimated) FROM llm_calls"
        f" WHERE {where} AND at >= ? AND at < ? GROUP BY b, stage, outcome"
        " ORDER BY b, stage, outcome",
        (bucket_seconds, *scope, start, end),
    ).fetchall()
    return [
        StageBucket(
            int(r[0]),
            str(r[1]),
            str(r[2]),
            int(r[3]),
            int(r[4] or 0),
            int(r[5] or 0),
            float(r[6] or 0.0),
            int(r[7] or 0),
        )
        for r in rows
    ]


def activity_buckets(
    conn: Connection,
    start: float,
    end: float,
    bucket_seconds: float,
    *,
    tenant: str | None = None,
    project_id: int | None = None,
) -> list[ActivityBucket]:
    """Episodes stored, memories formation created and entities created in
    [start, end) of one project or one tenant, by time bucket."""
    if project_id is not None:
        episodes = "JOIN sessions s ON s.id = e.session_id WHERE s.project_id = ?"
        owned: tuple[str | int, ...] = (project_id,)
        memories, entities = "project_id = ?", "project_id = ?"
    else:
        assert tenant is not None
        episodes = "JOIN sessions s ON s.id = e.session_id WHERE s.tenant = ?"
        owned = (tenant,)
        memories, entities = "tenant = ?", "tenant = ?"
    counts: dict[int, list[int]] = {}
    queries = (
        (
            f"SELECT {_bucket(conn, 'e.created_at')} AS b, COUNT(*) FROM episodes e {episodes}"
            " AND e.created_at >= ? AND e.created_at < ? GROUP BY b",
            0,
        ),
        (
            f"SELECT {_bucket(conn, 'created_at')} AS b, COUNT(*) FROM memories WHERE {memories}"
            " AND source = 'formation' AND created_at >= ? AND created_at < ? GROUP BY b",
            1,
        ),
        (
            f"SELECT {_bucket(conn, 'created_at')} AS b, COUNT(*) FROM entities WHERE {entities}"
            " AND created_at >= ? AND created_at < ? GROUP BY b",
            2,
        ),
    )
    for sql, column in queries:
        for b, n in conn.execute(sql, (bucket_seconds, *owned, start, end)).fetchall():
            counts.setdefault(int(b), [0, 0, 0])[column] = int(n)
    return [ActivityBucket(b, *counts[b]) for b in sorted(counts)]


def _scope(tenant: str | None, project_id: int | None) -> tuple[str, tuple[str | int, ...]]:
    if project_id is not None:
        return "project_id = ?", (project_id,)
    if tenant is None:
        raise ValueError("usage is read for a project or a tenant")
    return "tenant = ?", (tenant,)


def job_tenants(conn: Connection, kind: str, target_ids: Sequence[int]) -> dict[int, str]:
    """The tenant each target of an LLM job of ``kind`` belongs to (a target
    that is gone, or a kind that calls no LLM, is left out)."""
    sql = _TARGET_TENANT.get(kind)
    ids = sorted(set(target_ids))
    if sql is None or not ids:
        return {}
    rows = conn.execute(sql.format(ids=placeholders(len(ids))), ids).fetchall()
    return {int(r[0]): str(r[1]) for r in rows}


def defer_tenant_jobs(
    conn: Connection, kind: str, tenant: str, until: float, error: str
) -> list[Job]:
    """The tenant's pending jobs of ``kind`` due before ``until`` wait until
    then, saying why, without spending an attempt (at most ``DEFER_SWEEP`` of
    them, the oldest first). Returns the jobs it moved."""
    joined = _JOBS_OF_TENANT.get(kind)
    if joined is None:
        return []
    # One statement, and 'pending' checked again on the row it updates: a job
    # another batch claimed meanwhile is running, and its own outcome settles
    # it (a sweep that moved it too left a running job dated tomorrow).
    rows = conn.execute(
        "UPDATE jobs SET run_after = ?, last_error = ?, updated_at = ?"
        " WHERE state = 'pending' AND id IN ("
        f"SELECT j.id FROM jobs j {joined}"
        " AND j.kind = ? AND j.state = 'pending' AND j.run_after < ?"
        " ORDER BY j.priority, j.run_after, j.id LIMIT ?)"
        " RETURNING id, kind, target_id, attempts, priority",
        (until, error[:2000], now(), tenant, kind, until, DEFER_SWEEP),
    ).fetchall()
    # RETURNING's order is the store's own: give the claim order's.
    return sorted(
        (Job(r[0], r[1], r[2], r[3], r[4]) for r in rows), key=lambda j: (j.priority, j.id)
    )
