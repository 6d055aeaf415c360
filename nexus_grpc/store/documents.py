"""What each vector collection holds, read from the system of record.

Each loader returns ``{id: (text, payload)}`` for the rows that still exist;
an id missing from the answer means its point must be deleted.  Payloads
carry exactly the fields scope filters match on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from nexus_grpc.core.models import episode_text
from nexus_grpc.core.storage import Connection
from nexus_grpc.core.vectors import Document
from nexus_grpc.store.db import placeholders

Loader = Callable[[Connection, Sequence[int]], dict[int, Document]]

# Each collection's text and payload, from a row's values: the loaders below
# and a write that stores a new row's vector in its own transaction
# (domain/inline_vectors.py) build them the same way.


def episode_payload(session_id: int, created_at: float, occur_at: float) -> dict[str, Any]:
    # occurAt is whole seconds, rounded down: a window's range over it is
    # widened to whole seconds and SQLite re-checks the exact time.
    return {"sessionId": session_id, "createdAt": int(created_at), "occurAt": math.floor(occur_at)}


def entity_text(name: str, etype: str, notes: str | None, aliases: Sequence[str] = ()) -> str:
    """Name, type, the other names it goes by, and notes: a search for any of
    its names finds it by meaning too."""
    others = [a for a in dict.fromkeys(aliases) if a != name][:8]
    also = f"; also {', '.join(others)}" if others else ""
    return f"{name} ({etype}{also}): {notes or ''}".rstrip(": ")


def entity_payload(project_id: int, session_id: int) -> dict[str, Any]:
    return {"projectId": project_id, "sessionId": session_id}


def memory_text(title: str, content: str) -> str:
    return f"{title}\n{content}"


def memory_payload(
    kind: int, tier: int, project_id: int, user_id: str, session_id: int, agent_id: str
) -> dict[str, Any]:
    return {
        "kind": kind,
        "tier": tier,
        "projectId": project_id,
        "userId": user_id,
        "sessionId": session_id,
        "agentId": agent_id,
    }


def episodes(conn: Connection, ids: Sequence[int]) -> dict[int, Document]:
    rows = conn.execute(
        "SELECT id, session_id, user_message, ai_response, created_at, occur_at FROM episodes"
        f" WHERE id IN ({placeholders(len(ids))})",
        tuple(ids),
    )
    return {r[0]: (episode_text(r[2], r[3]), episode_payload(r[1], r[4], r[5])) for r in rows}


def entities(conn: Connection, ids: Sequence[int]) -> dict[int, Document]:
    rows = conn.execute(
        "SELECT id, name, type, notes, project_id, session_id FROM entities"
        f" WHERE id IN ({placeholders(len(ids))})",
        tuple(ids),
    ).fetchall()
    aliases: dict[int, list[str]] = {}
    for entity_id, alias in conn.execute(
        "SELECT entity_id, name FROM entity_aliases"
        f" WHERE entity_id IN ({placeholders(len(ids))}) ORDER BY id",
        tuple(ids),
    ):
        aliases.setdefault(entity_id, []).append(alias)
    return {
        r[0]: (entity_text(r[1], r[2], r[3], aliases.get(r[0], ())), entity_payload(r[4], r[5]))
        for r in rows
    }


def summaries(conn: Connection, ids: Sequence[int]) -> dict[int, Document]:
    rows = conn.execute(
        "SELECT s.id, s.content, COALESCE(s.session_id, 0),"
        " COALESCE(s.project_id, (SELECT project_id FROM sessions WHERE id = s.session_id), 0)"
        f" FROM summaries s WHERE s.id IN ({placeholders(len(ids))})",
        tuple(ids),
    )
    return {r[0]: (r[1], {"sessionId": r[2], "projectId": r[3] or 0}) for r in rows}


def memories(conn: Connection, ids: Sequence[int]) -> dict[int, Document]:
    rows = conn.execute(
        "SELECT id, title, content, kind, tier, project_id, user_id, session_id, agent_id"
        f" FROM memories WHERE id IN ({placeholders(len(ids))})",
        tuple(ids),
    )
    return {
        r[0]: (memory_text(r[1], r[2]), memory_payload(r[3], r[4], r[5], r[6], r[7], r[8]))
        for r in rows
    }


def all_ids(conn: Connection, table: str) -> set[int]:
    if table not in ("episodes", "entities", "summaries", "memories"):
        raise ValueError(table)
    return {r[0] for r in conn.execute(f"SELECT id FROM {table}")}
