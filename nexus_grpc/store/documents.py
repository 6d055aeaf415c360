"""What each vector collection holds, read from the system of record.

Each loader returns ``{id: (text, payload)}`` for the rows that still exist;
an id missing from the answer means its point must be deleted.  Payloads
carry exactly the fields scope filters match on.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from nexus_grpc.core.models import episode_text
from nexus_grpc.store.db import placeholders

Document = tuple[str, dict[str, Any]]
Loader = Callable[[sqlite3.Connection, Sequence[int]], dict[int, Document]]


def episodes(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Document]:
    rows = conn.execute(
        "SELECT id, session_id, user_message, ai_response, created_at, occur_at FROM episodes"
        f" WHERE id IN ({placeholders(len(ids))})",
        tuple(ids),
    )
    # occurAt is whole seconds, rounded down: a window's range over it is
    # widened to whole seconds and SQLite re-checks the exact time.
    return {
        r[0]: (
            episode_text(r[2], r[3]),
            {"sessionId": r[1], "createdAt": int(r[4]), "occurAt": math.floor(r[5])},
        )
        for r in rows
    }


def entities(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Document]:
    rows = conn.execute(
        "SELECT id, name, type, notes, project_id, session_id FROM entities"
        f" WHERE id IN ({placeholders(len(ids))})",
        tuple(ids),
    )
    return {
        r[0]: (
            f"{r[1]} ({r[2]}): {r[3] or ''}".rstrip(": "),
            {"projectId": r[4], "sessionId": r[5]},
        )
        for r in rows
    }


def summaries(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Document]:
    rows = conn.execute(
        "SELECT s.id, s.content, COALESCE(s.session_id, 0),"
        " COALESCE(s.project_id, (SELECT project_id FROM sessions WHERE id = s.session_id), 0)"
        f" FROM summaries s WHERE s.id IN ({placeholders(len(ids))})",
        tuple(ids),
    )
    return {r[0]: (r[1], {"sessionId": r[2], "projectId": r[3] or 0}) for r in rows}


def memories(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Document]:
    rows = conn.execute(
        "SELECT id, title, content, kind, tier, project_id, user_id, session_id, agent_id"
        f" FROM memories WHERE id IN ({placeholders(len(ids))})",
        tuple(ids),
    )
    return {
        r[0]: (
            f"{r[1]}\n{r[2]}",
            {
                "kind": r[3],
                "tier": r[4],
                "projectId": r[5],
                "userId": r[6],
                "sessionId": r[7],
                "agentId": r[8],
            },
        )
        for r in rows
    }


def all_ids(conn: sqlite3.Connection, table: str) -> set[int]:
    if table not in ("episodes", "entities", "summaries", "memories"):
        raise ValueError(table)
    return {r[0] for r in conn.execute(f"SELECT id FROM {table}")}
