"""Sessions table."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from nexus_grpc.core.erasure import RemovalTargets
from nexus_grpc.core.models import MemoryKind, Session
from nexus_grpc.core.tenancy import DEFAULT_TENANT
from nexus_grpc.errors import AlreadyExists, NotFound
from nexus_grpc.store.dialect import INTEGRITY_ERRORS, json_ints
from nexus_grpc.store.episodes import LIVE_SESSION
from nexus_grpc.store.sql import OnConnection, now


def _row(row: sqlite3.Row) -> Session:
    return Session(
        id=row["id"],
        external_id=row["external_id"],
        name=row["name"],
        project_id=row["project_id"] or 0,
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        tenant=row["tenant"],
        user_id=row["user_id"],
        agent_id=row["agent_id"],
    )


def _tenant_clause(tenant: str | None) -> tuple[str, tuple[str, ...]]:
    """`` AND`` the session is the tenant's (any, for None) and not in a
    project being deleted."""
    live = " AND " + LIVE_SESSION.format(s="sessions")
    return (live, ()) if tenant is None else (f" AND tenant = ?{live}", (tenant,))


def _retained(at: float | None) -> tuple[str, tuple[float, ...]]:
    """`` AND`` the session is not past its project's retention at ``at``
    (created before now - retention, with no episode that recent); nothing
    for ``at`` None."""
    if at is None:
        return "", ()
    return (
        " AND NOT EXISTS (SELECT 1 FROM projects rp WHERE rp.id = sessions.project_id"
        " AND rp.retention IS NOT NULL AND sessions.created_at < ? - rp.retention"
        " AND NOT EXISTS (SELECT 1 FROM episodes re WHERE re.session_id = sessions.id"
        " AND re.occur_at >= ? - rp.retention))",
        (at, at),
    )


class SqlSessions(OnConnection):
    """``SessionRepository`` on one connection."""

    __slots__ = ()

    def insert(
        self,
        external_id: str,
        name: str,
        project_id: int,
        metadata: Mapping[str, Any],
        tenant: str = DEFAULT_TENANT,
        user_id: str = "",
        agent_id: str = "",
    ) -> Session:
        try:
            row = self.conn.execute(
                "INSERT INTO sessions (tenant, external_id, name, project_id, metadata, created_at,"
                " user_id, agent_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    tenant,
                    external_id,
                    name,
                    project_id or None,
                    json.dumps(metadata),
                    now(),
                    user_id,
                    agent_id,
                ),
            ).fetchone()
        except INTEGRITY_ERRORS as exc:
            if "external_id" in str(exc):
                raise AlreadyExists(
                    f"a session with external_id {external_id!r} already exists"
                ) from exc
            raise
        return self.get(int(row[0]))

    def get(
        self,
        session_id: int,
        tenant: str | None = None,
        *,
        retained_at: float | None = None,
    ) -> Session:
        """The session; NOT_FOUND, with one message, when it does not exist or
        belongs to another tenant (``tenant`` None: any tenant), or, given
        ``retained_at``, is past its project's retention then."""
        clause, params = _tenant_clause(tenant)
        kept, kept_params = _retained(retained_at)
        row = self.conn.execute(
            f"SELECT * FROM sessions WHERE id = ?{clause}{kept}",
            (session_id, *params, *kept_params),
        ).fetchone()
        if row is None:
            raise NotFound(
                f"session {session_id} does not exist",
                resource_type="session",
                resource_name=str(session_id),
            )
        return _row(row)

    def get_by_external_id(
        self,
        external_id: str,
        tenant: str | None = None,
        *,
        retained_at: float | None = None,
    ) -> Session:
        # External ids are unique per tenant: the domain always names the one
        # to look in (``tenant`` None, every tenant, is for tools only).
        clause, params = _tenant_clause(tenant)
        kept, kept_params = _retained(retained_at)
        row = self.conn.execute(
            f"SELECT * FROM sessions WHERE external_id = ?{clause}{kept} ORDER BY id LIMIT 1",
            (external_id, *params, *kept_params),
        ).fetchone()
        if row is None:
            raise NotFound(
                f"session with external_id {external_id!r} does not exist",
                resource_type="session",
                resource_name=external_id,
            )
        return _row(row)

    def list_page(
        self,
        after_id: int | None,
        limit: int,
        project_id: int,
        tenant: str | None = None,
        *,
        retained_at: float | None = None,
    ) -> list[Session]:
        clause, params = _tenant_clause(tenant)
        kept, kept_params = _retained(retained_at)
        if project_id:
            rows = self.conn.execute(
                f"SELECT * FROM sessions WHERE project_id = ?{clause}{kept} AND id > ?"
                " ORDER BY id LIMIT ?",
                (project_id, *params, *kept_params, after_id or 0, limit),
            ).fetchall()
        else:
            rows = self.conn.execute(
                f"SELECT * FROM sessions WHERE id > ?{clause}{kept} ORDER BY id LIMIT ?",
                (after_id or 0, *params, *kept_params, limit),
            ).fetchall()
        return [_row(r) for r in rows]

    def project_session_ids(self, project_id: int) -> list[int]:
        rows = self.conn.execute("SELECT id FROM sessions WHERE project_id = ?", (project_id,))
        return [r[0] for r in rows]

    def user_session_ids(self, project_id: int, user_id: str) -> list[int]:
        """The project's sessions with ``user_id``: those that form that user's memories."""
        rows = self.conn.execute(
            "SELECT id FROM sessions WHERE project_id = ? AND user_id = ?", (project_id, user_id)
        )
        return [r[0] for r in rows]

    def update(
        self,
        session_id: int,
        changes: Mapping[str, Any],
        tenant: str | None = None,
    ) -> Session:
        self.get(session_id, tenant)
        for column, value in changes.items():
            if column == "name":
                self.conn.execute("UPDATE sessions SET name = ? WHERE id = ?", (value, session_id))
            elif column == "project_id":
                self.conn.execute(
                    "UPDATE sessions SET project_id = ? WHERE id = ?", (value or None, session_id)
                )
            elif column == "metadata":
                self.conn.execute(
                    "UPDATE sessions SET metadata = ? WHERE id = ?", (json.dumps(value), session_id)
                )
            else:  # the domain only passes the three columns above
                raise ValueError(f"not an updatable session column: {column}")
        return self.get(session_id)

    def task_memory_owners(self, session_id: int) -> dict[str, int]:
        """The session's TASK-tier USER memories (the ones ``delete`` takes with
        it), counted by user."""
        rows = self.conn.execute(
            "SELECT user_id, COUNT(*) FROM memories WHERE session_id = ? AND tier = 1 AND kind = ?"
            " GROUP BY user_id",
            (session_id, int(MemoryKind.USER)),
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def removal_targets(
        self, session_ids: Sequence[int], *, user_task_memories: bool = True
    ) -> RemovalTargets:
        """What deleting these sessions takes that has a vector point: their
        episodes and summaries, the graph of those outside any project (it is
        theirs alone) and their TASK-tier memories (``user_task_memories`` False:
        the PROJECT ones only, as ``delete`` takes them). The domain queues their
        index jobs before the rows go."""
        members = json.dumps(sorted({int(i) for i in session_ids}))
        ints = json_ints(self.conn)

        def ids(sql: str, *more: Any) -> tuple[int, ...]:
            rows = self.conn.execute(
                f"{sql} IN (SELECT value FROM {ints}){''.join(more)} ORDER BY id", (members,)
            )
            return tuple(int(r[0]) for r in rows)

        # tier = 1 (TASK) as a literal: it lets SQLite use the partial index
        # idx_memories_task_session (migration 11) instead of scanning memories.
        kinds = "" if user_task_memories else f" AND kind = {int(MemoryKind.PROJECT)}"
        return RemovalTargets(
            episodes=ids("SELECT id FROM episodes WHERE session_id"),
            summaries=ids("SELECT id FROM summaries WHERE session_id"),
            entities=ids("SELECT id FROM entities WHERE project_id = 0 AND session_id"),
            memories=ids("SELECT id FROM memories WHERE tier = 1 AND session_id", kinds),
        )

    def delete(
        self,
        session_id: int,
        tenant: str | None = None,
        *,
        user_task_memories: bool = True,
    ) -> int:
        """Delete a session and (by cascade) its episodes and summaries.

        The caller has queued the index jobs of what it takes
        (``removal_targets``), so their vector points are removed durably too.

        Its TASK-tier memories go with it; ``user_task_memories`` False keeps
        the USER ones (a delete no user asked for, the retention sweep, must not
        decide for them). The caller has already decided that the USER ones may go.
        """
        self.get(session_id, tenant)
        # The graph of a session outside any project is the session's alone: it
        # goes with it (edges and episode links by cascade).
        self.conn.execute(
            "DELETE FROM entities WHERE project_id = 0 AND session_id = ?", (session_id,)
        )
        # TASK-tier memories live only as long as their session: they go with it,
        # history included (no one can prove the origin session now).
        # tier = 1 (TASK) as a literal: it lets SQLite use the partial index
        # idx_memories_task_session (migration 11) instead of scanning memories.
        task_memories = "SELECT id FROM memories WHERE session_id = ? AND tier = 1"
        params: tuple[int, ...] = (session_id,)
        if not user_task_memories:
            task_memories += " AND kind = ?"
            params = (session_id, int(MemoryKind.PROJECT))
        self.conn.execute(
            f"DELETE FROM memory_history WHERE memory_id IN ({task_memories})", params
        )
        self.conn.execute(f"DELETE FROM memories WHERE id IN ({task_memories})", params)
        count = self.conn.execute(
            "SELECT COUNT(*) FROM episodes WHERE session_id = ?", (session_id,)
        ).fetchone()[0]
        self.conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        return int(count)

    def past_retention(self, project_id: int, cutoff: float, limit: int) -> list[int]:
        """The project's sessions created before ``cutoff`` with no episode since."""
        rows = self.conn.execute(
            "SELECT id FROM sessions s WHERE project_id = ? AND created_at < ?"
            " AND NOT EXISTS (SELECT 1 FROM episodes e WHERE e.session_id = s.id"
            " AND e.occur_at >= ?) ORDER BY id LIMIT ?",
            (project_id, cutoff, cutoff, limit),
        )
        return [r[0] for r in rows]
