"""The extraction event log: one row per finished or failed extraction.

Ids are AUTOINCREMENT, so they only grow (never reused after a delete) and a
client can resume a watch from the last id it saw.  Rows are written in the
same transaction as the outcome they report.
"""

from __future__ import annotations

import json
from typing import Any

from nexus_grpc.core.records import EXTRACTION_DONE, EXTRACTION_FAILED
from nexus_grpc.core.records import EventFilter as EventFilter
from nexus_grpc.core.records import ExtractionEvent as ExtractionEvent
from nexus_grpc.store import dialect
from nexus_grpc.store.sql import OnConnection, now

DONE = EXTRACTION_DONE
FAILED = EXTRACTION_FAILED
# PostgreSQL's LISTEN/NOTIFY channel that wakes watchers on every instance.
NOTIFY_CHANNEL = "nexus_extraction_events"


class SqlExtractionEvents(OnConnection):
    """``ExtractionEventRepository`` on one connection."""

    __slots__ = ()

    def insert(
        self,
        episode_id: int,
        session_id: int,
        project_id: int,
        status: int,
        error: str = "",
        payload: dict[str, Any] | None = None,
    ) -> int:
        # An event belongs to its session's tenant, written with it: the watch
        # log outlives deleted sessions and must stay confined after them.
        row = self.conn.execute(
            "INSERT INTO extraction_events (episode_id, session_id, project_id, status, error,"
            " payload, created_at, tenant) VALUES (?, ?, ?, ?, ?, ?, ?,"
            " COALESCE((SELECT tenant FROM sessions WHERE id = ?), '')) RETURNING id",
            (
                episode_id,
                session_id,
                project_id,
                status,
                error[:2000],
                json.dumps(payload or {}),
                now(),
                session_id,
            ),
        ).fetchone()
        event_id = int(row[0])
        # Other instances' watchers read the new row from the table once it commits.
        dialect.of(self.conn).announce(self.conn, NOTIFY_CHANNEL, str(event_id))
        return event_id

    def page_after(self, after_id: int, where: EventFilter, limit: int) -> list[ExtractionEvent]:
        """Events with id > after_id matching the filter, in id order."""
        clauses = ["id > ?"]
        params: list[object] = [after_id]
        for column, value in (
            ("episode_id", where.episode_id),
            ("session_id", where.session_id),
            ("project_id", where.project_id),
        ):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if where.tenant is not None:
            clauses.append("tenant = ?")
            params.append(where.tenant)
        if where.since:
            clauses.append("created_at >= ?")
            params.append(where.since)
        rows = self.conn.execute(
            "SELECT id, episode_id, session_id, project_id, status, error, payload, created_at"
            f" FROM extraction_events WHERE {' AND '.join(clauses)} ORDER BY id LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [
            ExtractionEvent(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7])
            for r in rows
        ]

    def any_for_episode(self, episode_id: int, tenant: str | None = None) -> bool:
        clause, params = ("", ()) if tenant is None else (" AND tenant = ?", (tenant,))
        row = self.conn.execute(
            f"SELECT 1 FROM extraction_events WHERE episode_id = ?{clause} LIMIT 1",
            (episode_id, *params),
        ).fetchone()
        return row is not None

    def delete_before(self, cutoff: float, limit: int) -> int:
        """Remove up to ``limit`` of the events written before ``cutoff``, oldest
        first (ids grow with time, so the walk stops at the first young one)."""
        return self.conn.execute(
            "DELETE FROM extraction_events WHERE id IN (SELECT id FROM extraction_events"
            " WHERE created_at < ? ORDER BY id LIMIT ?)",
            (cutoff, limit),
        ).rowcount
