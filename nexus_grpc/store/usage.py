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
from nexus_grpc.core.llm_usage import ActivityBucket, LLMCall, StageBucket, WorkOwner
from nexus_grpc.core.models import MemoryKind
from nexus_grpc.store import dialect
from nexus_grpc.store.sql import OnConnection, now, placeholders

#: Jobs a budget holds at once: one sweep is one short write, never a
#: backlog-long one on SQLite's single writer (a claim finds the rest).
DEFER_SWEEP = 1000

# Where each LLM job's target finds its tenant and the user its work is for:
# an episode through its session, a session itself, an entity its own column
# (a graph's entity is no user's). Kinds not here never call the LLM, and no
# budget holds them.
_TARGET_OWNER = {
    kinds.EXTRACT_EPISODE: "SELECT e.id, s.tenant, s.user_id FROM episodes e"
    " JOIN sessions s ON s.id = e.session_id WHERE e.id IN ({ids})",
    kinds.FORM_MEMORIES: "SELECT e.id, s.tenant, s.user_id FROM episodes e"
    " JOIN sessions s ON s.id = e.session_id WHERE e.id IN ({ids})",
    kinds.SUMMARIZE_SESSION: "SELECT id, tenant, user_id FROM sessions WHERE id IN ({ids})",
    kinds.RESOLVE_ENTITY: "SELECT id, tenant, '' FROM entities WHERE id IN ({ids})",
}
_JOBS_OF_TENANT = {
    kinds.EXTRACT_EPISODE: "JOIN episodes t ON t.id = j.target_id"
    " JOIN sessions s ON s.id = t.session_id WHERE s.tenant = ?",
    kinds.FORM_MEMORIES: "JOIN episodes t ON t.id = j.target_id"
    " JOIN sessions s ON s.id = t.session_id WHERE s.tenant = ?",
    kinds.SUMMARIZE_SESSION: "JOIN sessions s ON s.id = j.target_id WHERE s.tenant = ?",
    kinds.RESOLVE_ENTITY: "JOIN entities s ON s.id = j.target_id WHERE s.tenant = ?",
}
# The kinds whose work is a user's: their target's session names the user.
_USER_KINDS = frozenset({kinds.EXTRACT_EPISODE, kinds.FORM_MEMORIES, kinds.SUMMARIZE_SESSION})


def _scope(tenant: str | None, project_id: int | None) -> tuple[str, tuple[str | int, ...]]:
    if project_id is not None:
        return "project_id = ?", (project_id,)
    if tenant is None:
        raise ValueError("usage is read for a project or a tenant")
    return "tenant = ?", (tenant,)


class SqlUsage(OnConnection):
    """``UsageRepository`` on one connection."""

    __slots__ = ()

    def insert(self, calls: Sequence[LLMCall]) -> None:
        if not calls:
            return
        self.conn.executemany(
            "INSERT INTO llm_calls (at, tenant, project_id, stage, outcome, prompt_tokens,"
            " completion_tokens, seconds, estimated, user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?,"
            " ?)",
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
                    c.user_id,
                )
                for c in calls
            ],
        )

    def spent(self, since: float, tenants: Sequence[str] | None = None) -> dict[str, int]:
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
        rows = self.conn.execute(
            "SELECT tenant || '' AS owner, SUM(prompt_tokens + completion_tokens) FROM llm_calls"
            f" WHERE {where} GROUP BY owner",
            params,
        ).fetchall()
        found = {str(r[0]): int(r[1] or 0) for r in rows}
        if tenants is None:
            return found
        return {t: found.get(t, 0) for t in tenants}

    def spent_by_users(
        self, since: float, tenant: str, users: Sequence[str] | None = None
    ) -> dict[str, int]:
        """Tokens (both ways) the work for each of the tenant's users spent since
        ``since``: the named users (0 for one that spent nothing), or every user
        whose work spent any. Work for no user ('') is no user's."""
        if users is None:
            # Every user's: today's rows of the tenant (idx_llm_calls_tenant), grouped
            # by an expression; grouping by the column would walk the user index
            # over every day the tenant ever spent, for its order.
            sql = (
                "SELECT user_id || '' AS who, SUM(prompt_tokens + completion_tokens)"
                " FROM llm_calls WHERE tenant = ? AND user_id != '' AND at >= ? GROUP BY who"
            )
            params: list[float | str] = [tenant, since]
        else:
            named = sorted({u for u in users if u})
            if not named:
                return {}
            # Each named user's range of idx_llm_calls_user, from the index alone.
            sql = (
                "SELECT user_id, SUM(prompt_tokens + completion_tokens) FROM llm_calls"
                f" WHERE tenant = ? AND user_id IN ({placeholders(len(named))}) AND at >= ?"
                " GROUP BY user_id"
            )
            params = [tenant, *named, since]
        rows = self.conn.execute(sql, params).fetchall()
        found = {str(r[0]): int(r[1] or 0) for r in rows}
        if users is None:
            return found
        return {u: found.get(u, 0) for u in users if u}

    def _bucket(self, column: str) -> str:
        """The bucket a time falls in: whole bucket lengths since the epoch (UTC
        hours and days start on those multiples)."""
        return dialect.of(self.conn).whole_times(column)

    def stage_buckets(
        self,
        start: float,
        end: float,
        bucket_seconds: float,
        *,
        tenant: str | None = None,
        project_id: int | None = None,
        users: Sequence[str] | None = None,
    ) -> list[StageBucket]:
        """Calls in [start, end) of one project, or of one tenant, by time bucket,
        stage and outcome; with ``users``, only those of work done for them."""
        where, scope = _scope(tenant, project_id)
        if users is not None:
            if not users:
                return []
            where += f" AND user_id IN ({placeholders(len(users))})"
            scope = (*scope, *users)
        bucket = self._bucket("at")
        rows = self.conn.execute(
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
        self,
        start: float,
        end: float,
        bucket_seconds: float,
        *,
        tenant: str | None = None,
        project_id: int | None = None,
        users: Sequence[str] | None = None,
    ) -> list[ActivityBucket]:
        """Episodes stored, memories formation created and entities created in
        [start, end) of one project or one tenant, by time bucket.

        With ``users``, only what work for them made: their sessions' episodes;
        the memories formed from those episodes and their USER memories formed;
        the entities created that those episodes mention."""
        if project_id is not None:
            episodes = "JOIN sessions s ON s.id = e.session_id WHERE s.project_id = ?"
            owned: tuple[str | int, ...] = (project_id,)
            memories, entities = "m.project_id = ?", "n.project_id = ?"
        else:
            assert tenant is not None
            episodes = "JOIN sessions s ON s.id = e.session_id WHERE s.tenant = ?"
            owned = (tenant,)
            memories, entities = "m.tenant = ?", "n.tenant = ?"
        named: tuple[str, ...] = ()
        if users is not None:
            if not users:
                return []
            named = tuple(users)
            among = f"IN ({placeholders(len(named))})"
            theirs = (
                "SELECT 1 FROM episodes te JOIN sessions ts ON ts.id = te.session_id"
                f" WHERE ts.user_id {among} AND te.id = "
            )
            episodes += f" AND s.user_id {among}"
            memories += (
                f" AND (m.kind = {int(MemoryKind.USER)} AND m.user_id {among}"
                f" OR m.kind = {int(MemoryKind.PROJECT)} AND EXISTS ({theirs}m.source_episode_id))"
            )
            entities += (
                " AND EXISTS (SELECT 1 FROM entity_episodes ee JOIN episodes te ON te.id ="
                " ee.episode_id JOIN sessions ts ON ts.id = te.session_id WHERE ee.entity_id = n.id"
                f" AND ts.user_id {among})"
            )
        counts: dict[int, list[int]] = {}
        queries = (
            (
                f"SELECT {self._bucket('e.created_at')} AS b, COUNT(*) FROM episodes e {episodes}"
                " AND e.created_at >= ? AND e.created_at < ? GROUP BY b",
                0,
                named,
            ),
            (
                f"SELECT {self._bucket('m.created_at')} AS b, COUNT(*) FROM memories m"
                f" WHERE {memories} AND m.source = 'formation' AND m.created_at >= ?"
                " AND m.created_at < ? GROUP BY b",
                1,
                named + named,
            ),
            (
                f"SELECT {self._bucket('n.created_at')} AS b, COUNT(*) FROM entities n"
                f" WHERE {entities} AND n.created_at >= ? AND n.created_at < ? GROUP BY b",
                2,
                named,
            ),
        )
        for sql, column, among_users in queries:
            params = (bucket_seconds, *owned, *among_users, start, end)
            for b, n in self.conn.execute(sql, params).fetchall():
                counts.setdefault(int(b), [0, 0, 0])[column] = int(n)
        return [ActivityBucket(b, *counts[b]) for b in sorted(counts)]

    def job_owners(self, kind: str, target_ids: Sequence[int]) -> dict[int, WorkOwner]:
        """The tenant each target of an LLM job of ``kind`` belongs to, and the
        user its work is for ('' for none); a target that is gone, or a kind that
        calls no LLM, is left out."""
        sql = _TARGET_OWNER.get(kind)
        ids = sorted(set(target_ids))
        if sql is None or not ids:
            return {}
        rows = self.conn.execute(sql.format(ids=placeholders(len(ids))), ids).fetchall()
        return {int(r[0]): WorkOwner(str(r[1]), str(r[2] or "")) for r in rows}

    def defer_tenant_jobs(
        self, kind: str, tenant: str, until: float, error: str, user_id: str = ""
    ) -> list[Job]:
        """The tenant's pending jobs of ``kind`` due before ``until`` (with
        ``user_id``, only those of work for that user) wait until then, saying
        why, without spending an attempt (at most ``DEFER_SWEEP`` of them, the
        oldest first). Returns the jobs it moved."""
        joined = _JOBS_OF_TENANT.get(kind)
        if joined is None or (user_id and kind not in _USER_KINDS):
            return []
        params: tuple[str | float | int, ...] = (tenant,)
        if user_id:
            joined += " AND s.user_id = ?"
            params = (tenant, user_id)
        # One statement, and 'pending' checked again on the row it updates: a job
        # another batch claimed meanwhile is running, and its own outcome settles
        # it (a sweep that moved it too left a running job dated tomorrow).
        rows = self.conn.execute(
            "UPDATE jobs SET run_after = ?, last_error = ?, updated_at = ?"
            " WHERE state = 'pending' AND id IN ("
            f"SELECT j.id FROM jobs j {joined}"
            " AND j.kind = ? AND j.state = 'pending' AND j.run_after < ?"
            " ORDER BY j.priority, j.run_after, j.id LIMIT ?)"
            " RETURNING id, kind, target_id, attempts, priority",
            (until, error[:2000], now(), *params, kind, until, DEFER_SWEEP),
        ).fetchall()
        # RETURNING's order is the store's own: give the claim order's.
        return sorted(
            (Job(r[0], r[1], r[2], r[3], r[4]) for r in rows), key=lambda j: (j.priority, j.id)
        )

    def deferred_jobs(self, kind: str, saying: str, after: float, after_id: int = 0) -> list[Job]:
        """Pending jobs of ``kind`` that wait past ``after`` and whose last error
        says ``saying`` (a budget's deferral), by id after ``after_id``, at most
        ``DEFER_SWEEP``."""
        rows = self.conn.execute(
            "SELECT id, kind, target_id, attempts, priority FROM jobs WHERE kind = ?"
            " AND state = 'pending' AND run_after > ? AND id > ? AND last_error LIKE ?"
            " ORDER BY id LIMIT ?",
            (kind, after, after_id, f"%{saying}%", DEFER_SWEEP),
        ).fetchall()
        return [Job(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def resume_jobs(self, job_ids: Sequence[int], at: float) -> None:
        """The pending jobs are due at ``at``, their last error cleared."""
        if not job_ids:
            return
        self.conn.execute(
            "UPDATE jobs SET run_after = ?, last_error = '', updated_at = ?"
            f" WHERE state = 'pending' AND id IN ({placeholders(len(job_ids))})",
            (at, now(), *job_ids),
        )
