"""The jobs table: the outbox of durable background work.

A job is written in the same transaction as the data it concerns, so work is
never lost between "saved" and "queued".  Index jobs carry only the target id:
the worker reads the row when it runs, and a row that is gone means "delete
the point".  That makes every index job idempotent and order-free.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Sequence

from nexus_grpc.core.jobs import ALL_KINDS as ALL_KINDS
from nexus_grpc.core.jobs import BULK as BULK
from nexus_grpc.core.jobs import ERASE as ERASE
from nexus_grpc.core.jobs import EXPIRE_MEMORY as EXPIRE_MEMORY
from nexus_grpc.core.jobs import EXTRACT_EPISODE as EXTRACT_EPISODE
from nexus_grpc.core.jobs import FORM_MEMORIES as FORM_MEMORIES
from nexus_grpc.core.jobs import INDEX_ENTITY as INDEX_ENTITY
from nexus_grpc.core.jobs import INDEX_EPISODE as INDEX_EPISODE
from nexus_grpc.core.jobs import INDEX_MEMORY as INDEX_MEMORY
from nexus_grpc.core.jobs import INDEX_SUMMARY as INDEX_SUMMARY
from nexus_grpc.core.jobs import LEASE_SECONDS as LEASE_SECONDS
from nexus_grpc.core.jobs import LIVE as LIVE
from nexus_grpc.core.jobs import PURGE_MEMORY_HISTORY as PURGE_MEMORY_HISTORY
from nexus_grpc.core.jobs import RESOLVE_ENTITY as RESOLVE_ENTITY
from nexus_grpc.core.jobs import RETAIN_PROJECT as RETAIN_PROJECT
from nexus_grpc.core.jobs import SCHEDULED_KINDS as SCHEDULED_KINDS
from nexus_grpc.core.jobs import SUMMARIZE_SESSION as SUMMARIZE_SESSION
from nexus_grpc.core.jobs import Job as Job
from nexus_grpc.core.jobs import QueueDepth as QueueDepth
from nexus_grpc.store.dialect import json_ints, of
from nexus_grpc.store.sql import OnConnection, now

_DB_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"
#: This process, as it appears in ``jobs.leased_by``.
INSTANCE = f"{socket.gethostname()}:{os.getpid()}"


# The tenant a job's target belongs to, read from the target's row in the
# statement that queues the job (``{id}``: the target's id), so that every
# enqueue, the store's own cascades and sweeps included, writes it and none
# can name another: claims take tenants in turn by it (``claim``). A target
# that is already gone (an index job that deletes its point) has none: ''.
_EPISODE_TENANT = (
    "SELECT s.tenant FROM episodes e JOIN sessions s ON s.id = e.session_id WHERE e.id = {id}"
)
_MEMORY_TENANT = "SELECT tenant FROM memories WHERE id = {id}"
_ENTITY_TENANT = "SELECT tenant FROM entities WHERE id = {id}"
TENANT_OF: dict[str, str] = {
    INDEX_EPISODE: _EPISODE_TENANT,
    EXTRACT_EPISODE: _EPISODE_TENANT,
    FORM_MEMORIES: _EPISODE_TENANT,
    SUMMARIZE_SESSION: "SELECT tenant FROM sessions WHERE id = {id}",
    INDEX_SUMMARY: "SELECT COALESCE(s.tenant, p.tenant) FROM summaries m"
    " LEFT JOIN sessions s ON s.id = m.session_id LEFT JOIN projects p ON p.id = m.project_id"
    " WHERE m.id = {id}",
    INDEX_ENTITY: _ENTITY_TENANT,
    RESOLVE_ENTITY: _ENTITY_TENANT,
    INDEX_MEMORY: _MEMORY_TENANT,
    EXPIRE_MEMORY: _MEMORY_TENANT,
    # Queued while the memory is deleted (memory_history.record_deletion).
    PURGE_MEMORY_HISTORY: _MEMORY_TENANT,
    RETAIN_PROJECT: "SELECT tenant FROM projects WHERE id = {id}",
    ERASE: "SELECT tenant FROM erasures WHERE id = {id}",
}


def tenant_of(kind: str, target_id: str) -> str:
    """SQL for the tenant of ``kind``'s target whose id is the SQL ``target_id``."""
    lookup = TENANT_OF.get(kind)
    return "''" if lookup is None else f"COALESCE(({lookup.format(id=target_id)}), '')"


# A claim's order (core/jobs.py): at the most urgent priority with due jobs,
# each tenant's oldest due job in turn, the tenant this claimer served least
# recently first, then each one's second oldest, and so on. The jobs are found
# by skip scans of idx_jobs_lanes (kind, priority, tenant, run_after, id),
# never by reading a backlog: the priorities that have pending jobs, each
# one's tenants (its lanes), then the lanes' due jobs round by round (every
# lane's oldest, every lane's next...), one index step each, until the
# rounds hold a batch. A claim reads about (lanes + limit) index entries,
# whatever the backlog holds.
# A lane's jobs in the order of idx_jobs_lanes, the equal columns included:
# no other index gives it, so a planner that misjudges how many jobs a
# tenant has (PostgreSQL's generic plans do) still walks the lane in the
# index instead of filtering another index's walk of every tenant's jobs.
_LANE_ORDER = "d.kind, d.priority, d.tenant, d.run_after, d.id"
_LANES = """
levels(priority) AS (
    SELECT (SELECT MIN(priority) FROM jobs WHERE kind = {kind} AND state = 'pending')
    UNION ALL
    SELECT (SELECT MIN(priority) FROM jobs WHERE kind = {kind} AND state = 'pending'
            AND priority > levels.priority)
    FROM levels WHERE levels.priority IS NOT NULL
),
lanes(priority, tenant) AS (
    SELECT priority, (SELECT MIN(tenant) FROM jobs WHERE kind = {kind} AND state = 'pending'
                      AND priority = levels.priority)
    FROM levels WHERE levels.priority IS NOT NULL
    UNION ALL
    SELECT priority, (SELECT MIN(tenant) FROM jobs WHERE kind = {kind} AND state = 'pending'
                      AND priority = lanes.priority AND tenant > lanes.tenant)
    FROM lanes WHERE lanes.tenant IS NOT NULL
)"""

# SQLite has no LATERAL: the walk steps through each lane's due jobs, from
# one to the next after it, with its queue ordered by (priority, round): it
# takes every lane's oldest before any lane's second, the most urgent
# priority first, and stops after ``limit`` + lanes rows (a lane with nothing
# more due adds one empty row). Every round the batch draws from is then
# whole, so the served order (applied after) chooses within it. A target
# with a running job is passed over (one target's jobs never run at once).
_DUE_IN_LANE = (
    "d.kind = :kind AND d.state = 'pending' AND d.priority = {lane}.priority"
    " AND d.tenant = {lane}.tenant AND d.run_after <= :now"
    " AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.kind = d.kind"
    " AND r.target_id = d.target_id AND r.state = 'running')"
)
_SQLITE_CLAIM = f"""
WITH RECURSIVE {_LANES.format(kind=":kind")},
walk(priority, tenant, id, round) AS (
    SELECT priority, tenant, (SELECT d.id FROM jobs d WHERE {_DUE_IN_LANE.format(lane="lanes")}
                              ORDER BY {_LANE_ORDER} LIMIT 1), 1
    FROM lanes WHERE lanes.tenant IS NOT NULL
    UNION ALL
    SELECT w.priority, w.tenant,
           (SELECT d.id FROM jobs d, jobs c WHERE c.id = w.id AND {_DUE_IN_LANE.format(lane="w")}
            AND (d.run_after, d.id) > (c.run_after, c.id) ORDER BY {_LANE_ORDER} LIMIT 1),
           w.round + 1
    FROM walk w WHERE w.id IS NOT NULL AND w.round < :limit
    ORDER BY 1, 4
    LIMIT :limit + (SELECT COUNT(*) FROM lanes WHERE lanes.tenant IS NOT NULL)
)
SELECT j.id, j.kind, j.target_id, j.attempts, j.priority, j.tenant
FROM walk w JOIN jobs j ON j.id = w.id LEFT JOIN json_each(:served) s ON s.value = w.tenant
ORDER BY w.priority, w.round, s.key NULLS FIRST, j.run_after, j.id
LIMIT :limit
"""


# PostgreSQL's walks the lanes round by round too, each round one iteration
# of the recursive query, carrying how many jobs each priority has found so
# far (a window over the round): a priority's lanes stop once it has a batch.
# Running jobs whose lease ran out (their instance died or hangs) come before
# any of them. The candidates are read without locks; the claim then locks
# them in the claim order with SKIP LOCKED, up to ``limit``: a candidate
# another instance took meanwhile is passed over (FOR UPDATE reads its
# committed state again), so two instances never take one job, neither waits
# on the other, and no row is locked that is not claimed.
# - "Due" is the statement's time, not clock_timestamp(): a stable value is an
#   index condition, so a lane whose jobs all wait (postponed, scheduled) costs
#   one index probe, not a read of the lane.
# - The candidates are found again by primary key (``= ANY(ARRAY(...))``): the
#   planner cannot tell that a few come out of the walk, and would otherwise
#   hash the whole pending set to join them.
_PG_DUE = "EXTRACT(EPOCH FROM statement_timestamp())::double precision"
_PG_ALIVE = f"r.lease_until >= {_DB_NOW}"
_PG_DUE_IN_LANE = (
    "d.state = 'pending' AND d.priority = {lane}.priority"
    f" AND d.tenant = {{lane}}.tenant AND d.run_after <= {_PG_DUE}"
    " AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.kind = d.kind"
    f" AND r.target_id = d.target_id AND r.state = 'running' AND {_PG_ALIVE})"
)
_PG_CLAIM = f"""
WITH RECURSIVE {_LANES.format(kind="?")},
walk(kind, priority, tenant, id, run_after, round, found) AS (
    SELECT first.kind, first.priority, first.tenant, first.id, first.run_after, 1,
           count(*) OVER (PARTITION BY first.priority)
    FROM lanes CROSS JOIN LATERAL (
        SELECT d.kind, d.priority, d.tenant, d.id, d.run_after FROM jobs d
        WHERE d.kind = ? AND {_PG_DUE_IN_LANE.format(lane="lanes")}
        ORDER BY {_LANE_ORDER} LIMIT 1
    ) first
    WHERE lanes.tenant IS NOT NULL
    UNION ALL
    SELECT nxt.kind, nxt.priority, nxt.tenant, nxt.id, nxt.run_after, w.round + 1,
           w.found + count(*) OVER (PARTITION BY nxt.priority)
    FROM walk w CROSS JOIN LATERAL (
        SELECT d.kind, d.priority, d.tenant, d.id, d.run_after FROM jobs d
        WHERE d.kind = w.kind AND {_PG_DUE_IN_LANE.format(lane="w")}
          AND (d.run_after, d.id) > (w.run_after, w.id)
        ORDER BY {_LANE_ORDER} LIMIT 1
    ) nxt
    WHERE w.found < ?
),
candidates(id, priority, tenant, run_after, round) AS (
    SELECT id, priority, tenant, run_after, round FROM walk
    UNION ALL
    SELECT d.id, -1, d.tenant, d.run_after, 1 FROM jobs d
    WHERE d.kind = ? AND d.state = 'running' AND d.lease_until < {_DB_NOW}
      AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.kind = d.kind
                      AND r.target_id = d.target_id AND r.state = 'running' AND {_PG_ALIVE})
),
ordered AS (
    SELECT c.id, row_number() OVER (
        ORDER BY c.priority, c.round, s.turn NULLS FIRST, c.run_after, c.id) AS turn
    FROM candidates c LEFT JOIN unnest(?::text[]) WITH ORDINALITY AS s(tenant, turn)
        ON s.tenant = c.tenant
),
picked AS (
    SELECT j.id, o.turn FROM jobs j JOIN ordered o ON o.id = j.id
    WHERE j.id = ANY(ARRAY(SELECT id FROM ordered))
      AND ((j.state = 'pending' AND j.run_after <= {_PG_DUE})
           OR (j.state = 'running' AND j.lease_until < {_DB_NOW}))
    ORDER BY o.turn LIMIT ? FOR UPDATE OF j SKIP LOCKED
)
UPDATE jobs SET attempts = jobs.attempts + CASE WHEN jobs.state = 'running' THEN 1 ELSE 0 END,
    state = 'running', lease_until = {_DB_NOW} + ?, leased_by = ?, updated_at = ?
FROM picked WHERE jobs.id = picked.id
RETURNING jobs.id, jobs.kind, jobs.target_id, jobs.attempts, jobs.priority, jobs.tenant, picked.turn
"""


class SqlJobs(OnConnection):
    """``JobRepository`` on one connection."""

    __slots__ = ()

    def enqueue(
        self,
        kind: str,
        target_ids: Iterable[int],
        *,
        run_after: float | None = None,
        priority: int = LIVE,
    ) -> None:
        """Queue ``kind`` for each target, due now or at ``run_after``, at
        ``priority``, in its target's tenant. Work already pending for a target
        coalesces into its job,
        which takes the more urgent of the two priorities (live traffic touching
        an imported episode must not wait behind the import) and the sooner of the
        two due times: on PostgreSQL two transactions may each find no pending job
        and insert one, and the second must not leave its work waiting behind the
        first's later time (a sweep rescheduled an hour ahead while a session moved
        into its project asked for one now). A handler run early re-checks."""
        # One statement for every target, the ids bound as one JSON array (in
        # their order, each once: PostgreSQL refuses to update one row twice in
        # a statement), not one execution per target.
        ids = list(dict.fromkeys(int(t) for t in target_ids))
        if not ids:
            return
        ts = now()
        due = ts if run_after is None else run_after
        self.conn.execute(
            "INSERT INTO jobs (kind, target_id, run_after, created_at, updated_at, priority,"
            " tenant)"
            f" SELECT ?, t.value, ?, ?, ?, ?, {tenant_of(kind, 't.value')}"
            f" FROM {json_ints(self.conn)} AS t WHERE true"
            " ON CONFLICT (kind, target_id) WHERE state = 'pending'"
            # CASE, not MIN: PostgreSQL's MIN is an aggregate only (LEAST is its
            # scalar, which SQLite lacks).
            " DO UPDATE SET priority = CASE WHEN excluded.priority < jobs.priority"
            " THEN excluded.priority ELSE jobs.priority END,"
            " run_after = CASE WHEN excluded.run_after < jobs.run_after"
            " THEN excluded.run_after ELSE jobs.run_after END",
            (kind, due, ts, ts, priority, json.dumps(ids)),
        )

    def schedule(self, kind: str, target_id: int, at: float, *, keep_sooner: bool = False) -> None:
        """Make ``kind`` for ``target_id`` due at ``at``: moves a pending one, or
        queues one (a running one finishes first; its handler re-checks).

        ``keep_sooner``: a pending one due sooner stays due then. A handler that
        schedules its own next run passes it: on PostgreSQL its transaction runs
        beside others, and a pending job one of them queued meanwhile (a session
        moved into a retained project: sweep now) was queued for what this run
        could not see; an early run costs a re-check, a late one an hour."""
        moved = self.conn.execute(
            "UPDATE jobs SET run_after = CASE WHEN ? AND run_after < ? THEN run_after ELSE ? END,"
            " updated_at = ? WHERE kind = ? AND target_id = ? AND state = 'pending'",
            (keep_sooner, at, at, now(), kind, target_id),
        ).rowcount
        if not moved:
            self.enqueue(kind, [target_id], run_after=at)

    def enqueue_select(self, kind: str, select_ids: str, params: Sequence) -> int:
        ts = now()
        cur = self.conn.execute(
            "INSERT INTO jobs (kind, target_id, run_after, created_at, updated_at, tenant)"
            f" SELECT ?, ids.id, ?, ?, ?, {tenant_of(kind, 'ids.id')}"
            f" FROM ({select_ids}) AS ids WHERE true ON CONFLICT DO NOTHING",
            (kind, ts, ts, ts, *params),
        )
        return cur.rowcount

    def claim(
        self,
        kind: str,
        limit: int,
        lease: float = LEASE_SECONDS,
        *,
        served: Sequence[str] = (),
    ) -> list[Job]:
        """Take up to ``limit`` due jobs in the claim order (core/jobs.py: live
        before bulk, then tenants in turn, each one's oldest first), marking them
        running, and return them in that order. ``served``: the tenants this
        claimer has served, least recently first (domain/job_queue.TenantTurns);
        a tenant not in it comes first.

        A running job is out of the pending set, so a new request for the same
        target (say, a delete arriving while its upsert is being embedded) queues
        a fresh job instead of coalescing into one that already read stale data.
        That fresh job waits until the running one is recorded: one target's jobs
        never run at once, so with several batches in flight a slow upsert can
        never land after the delete that followed it.
        """
        if of(self.conn).leases_jobs:
            return self._claim_leased(kind, limit, lease, served)
        rows = self.conn.execute(
            _SQLITE_CLAIM,
            {"kind": kind, "now": now(), "limit": limit, "served": json.dumps(list(served))},
        ).fetchall()
        self.conn.executemany(
            "UPDATE jobs SET state = 'running', updated_at = ? WHERE id = ?",
            [(now(), r[0]) for r in rows],
        )
        return [Job(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def _claim_leased(
        self, kind: str, limit: int, lease: float, served: Sequence[str]
    ) -> list[Job]:
        """PostgreSQL's claim: many instances at once, none waiting on another.

        Each instance takes tenants in turn by its own memory of whom it served
        (``served``): with several instances, a newcomer's job waits for at most
        one claim per instance. A running job whose lease has run out is claimed
        again (an attempt spent, so a job that kills its instance every time
        reaches the dead letter); where the same work was queued again
        meanwhile, the stale running row goes and the pending one runs.
        """
        self.conn.execute(
            "DELETE FROM jobs j WHERE j.kind = ? AND j.state = 'running' AND j.lease_until <"
            f" {_DB_NOW}"
            " AND EXISTS (SELECT 1 FROM jobs p WHERE p.kind = j.kind AND p.target_id = j.target_id"
            " AND p.state = 'pending')",
            (kind,),
        )
        rows = self.conn.execute(
            _PG_CLAIM,
            (
                kind,
                kind,
                kind,
                kind,
                kind,
                limit,
                kind,
                list(served),
                limit,
                lease,
                INSTANCE,
                now(),
            ),
        ).fetchall()
        ordered = sorted(rows, key=lambda r: r[6])
        # Two rows of one target in one claim (a taken-over running row and a
        # pending one): the first covers both.
        seen: set[int] = set()
        kept = []
        for r in ordered:
            if r[2] in seen:
                self.conn.execute("DELETE FROM jobs WHERE id = ?", (r[0],))
            else:
                seen.add(r[2])
                kept.append(Job(r[0], r[1], r[2], r[3], r[4], r[5]))
        return kept

    def renew(self, job_ids: Sequence[int], lease: float = LEASE_SECONDS) -> None:
        """Extend the leases of jobs this instance is still running (PostgreSQL only:
        with one process per SQLite file, nothing else can take them)."""
        if job_ids and of(self.conn).leases_jobs:
            self.conn.execute(
                f"UPDATE jobs SET lease_until = {_DB_NOW} + ? WHERE id = ANY(?) AND state ="
                " 'running'",
                (lease, list(job_ids)),
            )

    def reset_running(self) -> int:
        """After a crash or restart, jobs that were running run again.

        Where the same work is queued twice (running and pending, or running
        twice), one job is kept: every job reads its row afresh, so one run covers
        both.

        On PostgreSQL this does nothing: the running jobs may be another live
        instance's. A dead instance's jobs come back when their leases run out.
        """
        if of(self.conn).leases_jobs:
            return 0
        self.conn.execute(
            "DELETE FROM jobs WHERE state = 'running' AND EXISTS (SELECT 1 FROM jobs o"
            " WHERE o.kind = jobs.kind AND o.target_id = jobs.target_id AND o.id != jobs.id"
            " AND (o.state = 'pending' OR (o.state = 'running' AND o.id > jobs.id)))"
        )
        return self.conn.execute(
            "UPDATE jobs SET state = 'pending' WHERE state = 'running'"
        ).rowcount

    def next_run_after(self, kind: str) -> float | None:
        row = self.conn.execute(
            "SELECT MIN(run_after) FROM jobs WHERE kind = ? AND state = 'pending'", (kind,)
        ).fetchone()
        return row[0]

    def finish(self, job_ids: Sequence[int]) -> None:
        self.conn.executemany("DELETE FROM jobs WHERE id = ?", [(j,) for j in job_ids])

    def retry_later(self, job_id: int, error: str, delay: float) -> None:
        self._back_to_pending(job_id, error, delay, spend_attempt=True)

    def postpone(self, job_id: int, error: str, delay: float) -> None:
        """Wait without spending an attempt: the dependency is down, not the job wrong."""
        self._back_to_pending(job_id, error, delay, spend_attempt=False)

    def postpone_pending(self, kind: str, error: str, until: float) -> None:
        """A dependency is down: every pending job of this kind waits until
        ``until`` and shows why, without spending an attempt."""
        self.conn.execute(
            f"UPDATE jobs SET run_after = {of(self.conn).greatest}(run_after, ?),"
            " last_error = ?, updated_at = ? WHERE kind = ? AND state = 'pending'",
            (until, error[:2000], now(), kind),
        )

    def _back_to_pending(
        self, job_id: int, error: str, delay: float, *, spend_attempt: bool
    ) -> None:
        # If the same work was queued again meanwhile, that newer job covers it.
        if self._covered_by_pending(job_id):
            return
        self.conn.execute(
            "UPDATE jobs SET state = 'pending', attempts = attempts + ?, run_after = ?,"
            " last_error = ?, updated_at = ? WHERE id = ?",
            (1 if spend_attempt else 0, now() + delay, error[:2000], now(), job_id),
        )

    def queued_targets(self, kind: str) -> set[int]:
        """Targets with a pending or running job: work already on its way."""
        rows = self.conn.execute(
            "SELECT target_id FROM jobs WHERE kind = ? AND state != 'failed'", (kind,)
        )
        return {r[0] for r in rows}

    def delete_created_before(self, kind: str, before: float) -> int:
        """Drop jobs a full rebuild has made redundant; newer ones still run."""
        return self.conn.execute(
            "DELETE FROM jobs WHERE kind = ? AND created_at <= ?", (kind, before)
        ).rowcount

    def _covered_by_pending(self, job_id: int) -> bool:
        """If the same work was queued again meanwhile, drop this job: the newer
        one reads the row afresh and covers it."""
        row = self.conn.execute(
            "SELECT kind, target_id FROM jobs WHERE id = ?", (job_id,)
        ).fetchone()
        if (
            row is not None
            and self.conn.execute(
                "SELECT 1 FROM jobs WHERE kind = ? AND target_id = ? AND state = 'pending'",
                tuple(row),
            ).fetchone()
        ):
            self.conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
            return True
        return False

    def dead_letter(self, job_id: int, error: str) -> bool:
        """Mark the job failed; False when a newer pending job covers it instead."""
        if self._covered_by_pending(job_id):
            return False
        self.conn.execute(
            "UPDATE jobs SET state = 'failed', attempts = attempts + 1, last_error = ?, updated_at"
            " = ?"
            " WHERE id = ?",
            (error[:2000], now(), job_id),
        )
        return True

    def requeue_failed(self, kind: str, target_id: int | None = None) -> int:
        """Move dead-lettered jobs back to pending (dropping those already pending again)."""
        where = "kind = ? AND state = 'failed'" + (" AND target_id = ?" if target_id else "")
        params: tuple = (kind, target_id) if target_id else (kind,)
        # Keep one failed row per target, or the UPDATE below would make two
        # pending jobs for one target.
        self.conn.execute(
            f"DELETE FROM jobs WHERE {where} AND id NOT IN"
            " (SELECT MAX(id) FROM jobs WHERE kind = ? AND state = 'failed' GROUP BY target_id)",
            (*params, kind),
        )
        self.conn.execute(
            f"DELETE FROM jobs WHERE {where} AND target_id IN"
            " (SELECT target_id FROM jobs WHERE kind = ? AND state = 'pending')",
            (*params, kind),
        )
        return self.conn.execute(
            f"UPDATE jobs SET state = 'pending', attempts = 0, run_after = ?, updated_at = ?"
            f" WHERE {where}",
            (now(), now(), *params),
        ).rowcount

    def pending_count(self, kind: str) -> int:
        """Jobs of ``kind`` waiting or running."""
        row = self.conn.execute(
            "SELECT COUNT(*) FROM jobs WHERE kind = ? AND state IN ('pending', 'running')", (kind,)
        ).fetchone()
        return int(row[0])

    def depths(self) -> list[QueueDepth]:
        rows = self.conn.execute(
            "SELECT kind, SUM(CASE WHEN state IN ('pending', 'running') THEN 1 ELSE 0 END),"
            " SUM(CASE WHEN state = 'failed' THEN 1 ELSE 0 END),"
            " MIN(CASE WHEN state != 'failed' THEN"
            f"  CASE WHEN kind IN ({','.join('?' * len(SCHEDULED_KINDS))})"
            "   THEN run_after ELSE created_at END END)"
            " FROM jobs GROUP BY kind",
            SCHEDULED_KINDS,
        ).fetchall()
        found = {r[0]: r for r in rows}
        ts = now()
        result = []
        for kind in ALL_KINDS:
            r = found.get(kind)
            if r is None:
                result.append(QueueDepth(kind, 0, 0, 0.0))
            else:
                result.append(
                    QueueDepth(
                        kind, int(r[1] or 0), int(r[2] or 0), max(0.0, ts - r[3]) if r[3] else 0.0
                    )
                )
        return result
