"""Session summaries and project overviews.

A session summary has ``session_id`` (and ``project_id`` NULL: its project is
the session's, read at query time, so moving a session moves its summaries);
a project overview has only ``project_id``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from nexus_grpc.core.records import Summary as Summary
from nexus_grpc.errors import NotFound
from nexus_grpc.store.sql import OnConnection, now

_SELECT = (
    "SELECT s.id, COALESCE(s.session_id, 0) AS session_id,"
    " COALESCE(s.project_id, (SELECT project_id FROM sessions WHERE id = s.session_id), 0)"
    " AS project_id, s.content, s.first_episode_id, s.last_episode_id, s.episode_count,"
    " s.created_at, s.updated_at FROM summaries s"
)


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


# A summary belongs to its session's tenant, an overview to its project's.
_TENANT = (
    "COALESCE((SELECT tenant FROM sessions WHERE id = s.session_id),"
    " (SELECT tenant FROM projects WHERE id = s.project_id))"
)


def _retained(at: float | None) -> tuple[str, tuple[float, ...]]:
    """`` AND`` the summary is not past its project's retention at ``at``;
    nothing for ``at`` None.

    A summary is past it when it was last written before the cutoff (all it
    was written from happened before then); a session's summary also when
    its session is past the retention (``sessions._retained``), or when it
    names the episodes it covers and none of them is within the retention
    (an imported conversation summarized since), however recently it was
    written. The retention sweep deletes the same rows (``past_retention``,
    and a session's summaries by cascade).
    """
    if at is None:
        return "", ()
    return (
        " AND NOT EXISTS (SELECT 1 FROM projects rp WHERE rp.retention IS NOT NULL"
        " AND rp.id = COALESCE(s.project_id,"
        " (SELECT project_id FROM sessions WHERE id = s.session_id))"
        f" AND {_PAST.format(cutoff='? - rp.retention')})",
        (at, at, at, at),
    )


# A summary of the project ``rp`` past the retention's {cutoff} (see _retained).
_PAST = (
    "(s.updated_at < {cutoff}"
    " OR EXISTS (SELECT 1 FROM sessions rs WHERE rs.id = s.session_id"
    " AND rs.created_at < {cutoff}"
    " AND NOT EXISTS (SELECT 1 FROM episodes re WHERE re.session_id = rs.id"
    " AND re.occur_at >= {cutoff}))"
    " OR (s.session_id IS NOT NULL AND s.last_episode_id > 0"
    " AND NOT EXISTS (SELECT 1 FROM episodes ce WHERE ce.session_id = s.session_id"
    " AND ce.id >= s.first_episode_id AND ce.id <= s.last_episode_id"
    " AND ce.occur_at >= {cutoff})))"
)


class SqlSummaries(OnConnection):
    """``SummaryRepository`` on one connection."""

    __slots__ = ()

    def insert(
        self,
        *,
        session_id: int,
        project_id: int,
        content: str,
        first_episode_id: int = 0,
        last_episode_id: int = 0,
        episode_count: int = 0,
    ) -> Summary:
        ts = now()
        row = self.conn.execute(
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
        return self.get(int(row[0]))

    def find(
        self,
        summary_id: int,
        tenant: str | None = None,
        *,
        retained_at: float | None = None,
    ) -> Summary | None:
        kept, kept_params = _retained(retained_at)
        if tenant is None:
            row = self.conn.execute(
                f"{_SELECT} WHERE s.id = ?{kept}", (summary_id, *kept_params)
            ).fetchone()
        else:
            row = self.conn.execute(
                f"{_SELECT} WHERE s.id = ? AND {_TENANT} = ?{kept}",
                (summary_id, tenant, *kept_params),
            ).fetchone()
        return _row(row) if row else None

    def get(
        self,
        summary_id: int,
        tenant: str | None = None,
        *,
        retained_at: float | None = None,
    ) -> Summary:
        """The summary; NOT_FOUND, with one message, when it does not exist or
        belongs to another tenant (``tenant`` None: any tenant), or, given
        ``retained_at``, is past its project's retention then."""
        summary = self.find(summary_id, tenant, retained_at=retained_at)
        if summary is None:
            raise NotFound(
                f"summary {summary_id} does not exist",
                resource_type="summary",
                resource_name=str(summary_id),
            )
        return summary

    def update(
        self,
        summary_id: int,
        changes: Mapping[str, Any],
        tenant: str | None = None,
        *,
        retained_at: float | None = None,
    ) -> Summary:
        self.get(summary_id, tenant, retained_at=retained_at)
        if changes:
            cols = ", ".join(f"{k} = ?" for k in changes)
            self.conn.execute(
                f"UPDATE summaries SET {cols}, updated_at = ? WHERE id = ?",
                (*changes.values(), now(), summary_id),
            )
        return self.get(summary_id)

    def delete(
        self,
        summary_id: int,
        tenant: str | None = None,
        *,
        retained_at: float | None = None,
    ) -> None:
        self.get(summary_id, tenant, retained_at=retained_at)
        self.conn.execute("DELETE FROM summaries WHERE id = ?", (summary_id,))

    def ids_of_session(self, session_id: int) -> list[int]:
        """Every summary of the session, retained or not."""
        rows = self.conn.execute(
            "SELECT id FROM summaries WHERE session_id = ? ORDER BY id", (session_id,)
        ).fetchall()
        return [int(r[0]) for r in rows]

    def list_for_session(
        self,
        session_id: int,
        after_id: int | None,
        limit: int,
        *,
        retained_at: float | None = None,
    ) -> list[Summary]:
        kept, kept_params = _retained(retained_at)
        rows = self.conn.execute(
            f"{_SELECT} WHERE s.session_id = ?{kept} AND s.id > ? ORDER BY s.id LIMIT ?",
            (session_id, *kept_params, after_id or 0, limit),
        ).fetchall()
        return [_row(r) for r in rows]

    def list_for_project(
        self,
        project_id: int,
        after_id: int | None,
        limit: int,
        *,
        retained_at: float | None = None,
    ) -> list[Summary]:
        """The project's overviews and the summaries of its sessions, oldest first."""
        kept, kept_params = _retained(retained_at)
        rows = self.conn.execute(
            f"{_SELECT} WHERE (s.project_id = ? AND s.session_id IS NULL"
            " OR s.session_id IN (SELECT id FROM sessions WHERE project_id = ?))"
            f"{kept} AND s.id > ? ORDER BY s.id LIMIT ?",
            (project_id, project_id, *kept_params, after_id or 0, limit),
        ).fetchall()
        return [_row(r) for r in rows]

    def latest_for_session(
        self, session_id: int, *, retained_at: float | None = None
    ) -> Summary | None:
        kept, kept_params = _retained(retained_at)
        row = self.conn.execute(
            f"{_SELECT} WHERE s.session_id = ?{kept}"
            " ORDER BY s.last_episode_id DESC, s.id DESC LIMIT 1",
            (session_id, *kept_params),
        ).fetchone()
        return _row(row) if row else None

    def overview(self, project_id: int, *, retained_at: float | None = None) -> Summary | None:
        kept, kept_params = _retained(retained_at)
        row = self.conn.execute(
            f"{_SELECT} WHERE s.project_id = ? AND s.session_id IS NULL{kept}"
            " ORDER BY s.id DESC LIMIT 1",
            (project_id, *kept_params),
        ).fetchone()
        return _row(row) if row else None

    def project_session_summaries(
        self, project_id: int, *, retained_at: float | None = None
    ) -> list[Summary]:
        """Summaries of the project's sessions, oldest material first."""
        kept, kept_params = _retained(retained_at)
        rows = self.conn.execute(
            f"{_SELECT} WHERE s.session_id IN (SELECT id FROM sessions WHERE project_id = ?)"
            f"{kept} ORDER BY s.updated_at, s.id",
            (project_id, *kept_params),
        ).fetchall()
        return [_row(r) for r in rows]

    def project_recent_episodes(
        self, project_id: int, limit: int, *, since: float | None = None
    ) -> list[tuple[int, str, str]]:
        """The project's most recent episodes, (id, user, ai), returned oldest first.
        ``since``: only episodes whose occur_at is not before it (a retention;
        a session past it has no episode since, so none of its own is read)."""
        kept = "" if since is None else " AND e.occur_at >= ?"
        rows = self.conn.execute(
            "SELECT e.id, e.user_message, e.ai_response FROM episodes e"
            f" WHERE e.session_id IN (SELECT id FROM sessions WHERE project_id = ?){kept}"
            " ORDER BY e.id DESC LIMIT ?",
            (project_id, *(() if since is None else (since,)), limit),
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in reversed(rows)]

    def past_retention(self, project_id: int, cutoff: float, limit: int) -> list[int]:
        """The project's summaries (its overviews and its sessions') that reads
        hide as past the retention whose cutoff is ``cutoff`` (``_retained``)."""
        rows = self.conn.execute(
            "SELECT s.id FROM summaries s WHERE (s.project_id = ? AND s.session_id IS NULL"
            " OR s.session_id IN (SELECT id FROM sessions WHERE project_id = ?))"
            f" AND {_PAST.format(cutoff='?')} ORDER BY s.id LIMIT ?",
            (project_id, project_id, cutoff, cutoff, cutoff, cutoff, limit),
        )
        return [r[0] for r in rows]
