"""Projects table."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from nexus_grpc.domain.models import Project
from nexus_grpc.errors import NotFound
from nexus_grpc.store import jobs
from nexus_grpc.store.db import now

COLUMNS = ("name", "description", "colour", "icon", "notes", "system_prompt")


def _row(row: sqlite3.Row) -> Project:
    return Project(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        colour=row["colour"],
        icon=row["icon"],
        notes=row["notes"],
        system_prompt=row["system_prompt"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def insert(conn: sqlite3.Connection, values: Mapping[str, Any]) -> Project:
    ts = now()
    cur = conn.execute(
        "INSERT INTO projects (name, description, colour, icon, notes, system_prompt,"
        " isolated, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)",
        (*(values.get(c, "") for c in COLUMNS), ts, ts),
    )
    return get(conn, cur.lastrowid or 0)


def get(conn: sqlite3.Connection, project_id: int) -> Project:
    row = conn.execute("SELECT * FROM projects WHERE id = ?", (project_id,)).fetchone()
    if row is None:
        raise NotFound(f"project {project_id} does not exist")
    return _row(row)


def exists(conn: sqlite3.Connection, project_id: int) -> bool:
    return conn.execute("SELECT 1 FROM projects WHERE id = ?", (project_id,)).fetchone() is not None


def list_page(conn: sqlite3.Connection, after_id: int | None, limit: int) -> list[Project]:
    rows = conn.execute(
        "SELECT * FROM projects WHERE id > ? ORDER BY id LIMIT ?", (after_id or 0, limit)
    ).fetchall()
    return [_row(r) for r in rows]


def update(conn: sqlite3.Connection, project_id: int, changes: Mapping[str, Any]) -> Project:
    get(conn, project_id)
    if changes:
        # Column names come from COLUMNS (checked by the domain), never from the client.
        assignments = ", ".join(f"{c} = ?" for c in changes if c in COLUMNS)
        conn.execute(
            f"UPDATE projects SET {assignments}, updated_at = ? WHERE id = ?",
            (*[v for c, v in changes.items() if c in COLUMNS], now(), project_id),
        )
    return get(conn, project_id)


def delete(conn: sqlite3.Connection, project_id: int) -> int:
    """Detach the project's sessions, then delete it and what only it owned:
    its memories, its graph and its overviews (their index points go through index
    jobs in the same transaction).  Returns the sessions detached."""
    get(conn, project_id)
    # Detached sessions' summaries carry the project in their vector payload.
    jobs.enqueue_select(
        conn,
        jobs.INDEX_SUMMARY,
        "SELECT s.id FROM summaries s JOIN sessions ss ON ss.id = s.session_id"
        " WHERE ss.project_id = ?",
        (project_id,),
    )
    for table, kind in (("memories", jobs.INDEX_MEMORY), ("summaries", jobs.INDEX_SUMMARY)):
        jobs.enqueue_select(
            conn, kind, f"SELECT id FROM {table} WHERE project_id = ?", (project_id,)
        )
    jobs.enqueue_select(
        conn, jobs.INDEX_ENTITY, "SELECT id FROM entities WHERE project_id = ?", (project_id,)
    )
    conn.execute("DELETE FROM memories WHERE project_id = ?", (project_id,))
    # Its graph goes too (edges and episode links by cascade).
    conn.execute("DELETE FROM entities WHERE project_id = ?", (project_id,))
    detached = conn.execute(
        "UPDATE sessions SET project_id = NULL WHERE project_id = ?", (project_id,)
    ).rowcount
    conn.execute("DELETE FROM projects WHERE id = ?", (project_id,))
    return detached
