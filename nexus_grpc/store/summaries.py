"""Session summaries and project overviews.

A session summary has ``session_id`` (and ``project_id`` NULL: its project is
the session's, read at query time, so moving a session moves its summaries);
a project overview has only ``project_id``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nexus_grpc.errors import NotFound
from nexus_grpc.store import jobs
from nexus_grpc.store.db import now

_SELECT = (
    "SELECT s.id, COALESCE(s.session_id, 0) AS session_id,"
    " COALESCE(s.project_id, (SELECT project_id FROM sessions WHERE id = s.session_id), 0)"
    " AS project_id, s.content, s.first_episode_id, s.last_episode_id, s.episode_count,"
    " s.created_at, s.updated_at FROM summaries s"
)


@dataclass(frozen=True)
class Summary:
    id: int
    session_id: int
    project_id: int
    content: str
    first_episode_id: int = 0
    last_episode_id: int = 0
    episode_count: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def is_overview(self) -> bool:
        return not self.session_id


def _row(r: sqlite3.Row) -> Summary:
    return Summary(
        id=r["id"],
        session_id=r["session_id"],
        project_id=r["project_id"] or 0,
        content=r["content"],
        first_episode_id=r["first_episode_id"],
        last_episode_id=r["last_episode_id"],
        episode_count=r["episode_count"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


def insert(
    conn: sqlite3.Connection,
    *,
    session_id: int,
    project_id: int,
    content: str,
    first_episode_id: int = 0,
    last_episode_id: int = 0,
    episode_count: int = 0,
) -> Summary:
    ts = now()
    row = conn.execute(
        "INSERT INTO summaries (session_id, project_id, content, first_episode_id,"
        " last_episode_id, episode_count, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            session_id or None,
            None if session_id else (project_id or None),
            content,
            first_episode_id,
            last_episode_id,
            episode_count,
            ts,
            ts,
        ),
    ).fetchone()
    summary_id = int(row[0])
    jobs.enqueue(conn, jobs.INDEX_SUMMARY, [summary_id])
    return get(conn, summary_id)


# A summary belongs to its session's tenant, an overview to its project's.
_TENANT = (
    "COALESCE((SELECT tenant FROM sessions WHERE id = s.session_id),"
    " (SELECT tenant FROM projects WHERE id = s.project_id))"
)


def find(conn: sqlite3.Connection, summary_id: int, tenant: str | None = None) -> Summary | None:
    if tenant is None:
        row = conn.execute(f"{_SELECT} WHERE s.id = ?", (summary_id,)).fetchone()
    else:
        row = conn.execute(
            f"{_SELECT} WHERE s.id = ? AND {_TENANT} = ?", (summary_id, tenant)
        ).fetchone()
    return _row(row) if row else None


def get(conn: sqlite3.Connection, summary_id: int, tenant: str | None = None) -> Summary:
    """The summary; NOT_FOUND, with one message, when it does not exist or
    belongs to another tenant (``tenant`` None: any tenant)."""
    summary = find(conn, summary_id, tenant)
    if summary is None:
        raise NotFound(f"summary {summary_id} does not exist")
    return summary


def update(
    conn: sqlite3.Connection,
    summary_id: int,
    changes: Mapping[str, Any],
    tenant: str | None = None,
) -> Summary:
    get(conn, summary_id, tenant)
    if changes:
        cols = ", ".join(f"{k} = ?" for k in changes)
        conn.execute(
            f"UPDATE summaries SET {cols}, updated_at = ? WHERE id = ?",
            (*changes.values(), now(), summary_id),
        )
        jobs.enqueue(conn, jobs.INDEX_SUMMARY, [summary_id])
    return get(conn, summary_id)


def delete(conn: sqlite3.Connection, summary_id: int, tenant: str | None = None) -> None:
    get(conn, summary_id, tenant)
    conn.execute("DELETE FROM summaries WHERE id = ?", (summary_id,))
    jobs.enqueue(conn, jobs.INDEX_SUMMARY, [summary_id])


def list_for_session(
    conn: sqlite3.Connection, session_id: int, after_id: int | None, limit: int
) -> list[Summary]:
    rows = conn.execute(
        f"{_SELECT} WHERE s.session_id = ? AND s.id > ? ORDER BY s.id LIMIT ?",
        (session_id, after_id or 0, limit),
    ).fetchall()
    return [_row(r) for r in rows]


def list_for_project(
    conn: sqlite3.Connection, project_id: int, after_id: int | None, limit: int
) -> list[Summary]:
    """The project's overviews and the summaries of its sessions, oldest first."""
    rows = conn.execute(
        f"{_SELECT} WHERE (s.project_id = ? AND s.session_id IS NULL"
        " OR s.session_id IN (SELECT id FROM sessions WHERE project_id = ?))"
        " AND s.id > ? ORDER BY s.id LIMIT ?",
        (project_id, project_id, after_id or 0, limit),
    ).fetchall()
    return [_row(r) for r in rows]


def latest_for_session(conn: sqlite3.Connection, session_id: int) -> Summary | None:
    row = conn.execute(
        f"{_SELECT} WHERE s.session_id = ? ORDER BY s.last_episode_id DESC, s.id DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    return _row(row) if row else None


def overview(conn: sqlite3.Connection, project_id: int) -> Summary | None:
    row = conn.execute(
        f"{_SELECT} WHERE s.project_id = ? AND s.session_id IS NULL ORDER BY s.id DESC LIMIT 1",
        (project_id,),
    ).fetchone()
    return _row(row) if row else None


def project_session_summaries(conn: sqlite3.Connection, project_id: int) -> list[Summary]:
    """Summaries of the project's sessions, oldest material first."""
    rows = conn.execute(
        f"{_SELECT} WHERE s.session_id IN (SELECT id FROM sessions WHERE project_id = ?)"
        " ORDER BY s.updated_at, s.id",
        (project_id,),
    ).fetchall()
    return [_row(r) for r in rows]


def project_recent_episodes(
    conn: sqlite3.Connection, project_id: int, limit: int
) -> list[tuple[int, str, str]]:
    """The project's most recent episodes, (id, user, ai), returned oldest first."""
    rows = conn.execute(
        "SELECT e.id, e.user_message, e.ai_response FROM episodes e"
        " WHERE e.session_id IN (SELECT id FROM sessions WHERE project_id = ?)"
        " ORDER BY e.id DESC LIMIT ?",
        (project_id, limit),
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in reversed(rows)]
