"""What each vector collection holds, read from the system of record.

Each loader returns ``{id: (text, payload)}`` for the rows that still exist;
an id missing from the answer means its point must be deleted.  Payloads
carry exactly the fields scope filters match on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nexus_grpc.core.documents import (
    entity_payload,
    entity_text,
    episode_payload,
    memory_payload,
    memory_text,
)
from nexus_grpc.core.models import episode_text
from nexus_grpc.core.storage import Connection
from nexus_grpc.core.vectors import Document
from nexus_grpc.store.sql import OnConnection, placeholders

Loader = Callable[[Connection, Sequence[int]], dict[int, Document]]


class SqlDocuments(OnConnection):
    """``DocumentRepository`` on one connection."""

    __slots__ = ()

    def episodes(self, ids: Sequence[int]) -> dict[int, Document]:
        rows = self.conn.execute(
            "SELECT id, session_id, user_message, ai_response, created_at, occur_at FROM episodes"
            f" WHERE id IN ({placeholders(len(ids))})",
            tuple(ids),
        )
        return {r[0]: (episode_text(r[2], r[3]), episode_payload(r[1], r[4], r[5])) for r in rows}

    def entities(self, ids: Sequence[int]) -> dict[int, Document]:
        rows = self.conn.execute(
            "SELECT id, name, type, notes, project_id, session_id FROM entities"
            f" WHERE id IN ({placeholders(len(ids))})",
            tuple(ids),
        ).fetchall()
        aliases: dict[int, list[str]] = {}
        for entity_id, alias in self.conn.execute(
            "SELECT entity_id, name FROM entity_aliases"
            f" WHERE entity_id IN ({placeholders(len(ids))}) ORDER BY id",
            tuple(ids),
        ):
            aliases.setdefault(entity_id, []).append(alias)
        return {
            r[0]: (entity_text(r[1], r[2], r[3], aliases.get(r[0], ())), entity_payload(r[4], r[5]))
            for r in rows
        }

    def summaries(self, ids: Sequence[int]) -> dict[int, Document]:
        rows = self.conn.execute(
            "SELECT s.id, s.content, COALESCE(s.session_id, 0),"
            " COALESCE(s.project_id, (SELECT project_id FROM sessions WHERE id = s.session_id), 0)"
            f" FROM summaries s WHERE s.id IN ({placeholders(len(ids))})",
            tuple(ids),
        )
        return {r[0]: (r[1], {"sessionId": r[2], "projectId": r[3] or 0}) for r in rows}

    def memories(self, ids: Sequence[int]) -> dict[int, Document]:
        rows = self.conn.execute(
            "SELECT id, title, content, kind, tier, project_id, user_id, session_id, agent_id,"
            f" tenant FROM memories WHERE id IN ({placeholders(len(ids))})",
            tuple(ids),
        )
        return {r[0]: (memory_text(r[1], r[2]), memory_payload(*r[3:10])) for r in rows}

    def all_ids(self, table: str) -> set[int]:
        if table not in ("episodes", "entities", "summaries", "memories"):
            raise ValueError(table)
        return {r[0] for r in self.conn.execute(f"SELECT id FROM {table}")}
