"""The memory_history table: the version each update or delete replaced.

A row is written in the same transaction as the change it records, so a
change that committed always has its history. Rows of a deleted memory carry
``purge_after``; a ``purge:memory_history`` job scheduled for that time (also
written with the delete) removes them.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Sequence

from nexus_grpc.core.records import DELETE as DELETE
from nexus_grpc.core.records import EXPIRE as EXPIRE
from nexus_grpc.core.records import GONE as GONE
from nexus_grpc.core.records import UPDATE as UPDATE
from nexus_grpc.core.records import ChangedBy as ChangedBy
from nexus_grpc.core.records import Revision as Revision
from nexus_grpc.store.memories import Memory
from nexus_grpc.store.sql import OnConnection, now


def _memory_json(memory: Memory) -> str:
    return json.dumps(dataclasses.asdict(memory))


def _row(r: sqlite3.Row) -> Revision:
    return Revision(
        id=r["id"],
        memory_id=r["memory_id"],
        action=r["action"],
        changed=json.loads(r["changed"]),
        previous=Memory(**json.loads(r["previous"])),
        request_id=r["request_id"],
        principal=r["principal"],
        changed_at=r["changed_at"],
        purge_after=r["purge_after"],
        episode_id=r["episode_id"],
        reason=r["reason"],
    )


class MemoryHistoryRows(OnConnection):
    """The part of ``MemoryRepository`` whose rows this module holds, on one
    connection (``SqlMemories`` in store/unit_of_work.py is the whole)."""

    __slots__ = ()

    def record(
        self,
        previous: Memory,
        action: int,
        changed: Sequence[str],
        by: ChangedBy,
        purge_after: float | None = None,
        at: float | None = None,
    ) -> None:
        """``at``: when the change was made (now, unless a restore gives the exported time)."""
        self.conn.execute(
            "INSERT INTO memory_history (memory_id, action, changed, previous, kind, user_id, tier,"
            " session_id, request_id, principal, changed_at, purge_after, episode_id, reason)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                previous.id,
                action,
                json.dumps(list(changed)),
                _memory_json(previous),
                previous.kind,
                previous.user_id,
                previous.tier,
                previous.session_id,
                by.request_id,
                by.principal,
                now() if at is None else at,
                purge_after,
                by.episode_id,
                by.reason,
            ),
        )

    def record_deletion(
        self,
        previous: Memory,
        by: ChangedBy,
        purge_after: float,
        action: int = DELETE,
    ) -> None:
        """The delete's (or expiry's) revision, and every version of the memory
        marked to go at ``purge_after`` (the domain queues the purge,
        domain/memory_upkeep.py)."""
        self.record(previous, action, [], by, purge_after)
        self.conn.execute(
            "UPDATE memory_history SET purge_after = ? WHERE memory_id = ?",
            (purge_after, previous.id),
        )

    def last(self, memory_id: int) -> Revision | None:
        row = self.conn.execute(
            "SELECT * FROM memory_history WHERE memory_id = ? ORDER BY id DESC LIMIT 1",
            (memory_id,),
        ).fetchone()
        return _row(row) if row else None

    def page(self, memory_id: int, after_id: int | None, limit: int) -> list[Revision]:
        """Oldest first."""
        rows = self.conn.execute(
            "SELECT * FROM memory_history WHERE memory_id = ? AND id > ? ORDER BY id LIMIT ?",
            (memory_id, after_id or 0, limit),
        ).fetchall()
        return [_row(r) for r in rows]

    def purge(self, memory_ids: Sequence[int], at: float) -> int:
        """Remove the history of deleted memories whose retention ended by ``at``."""
        removed = 0
        for memory_id in memory_ids:
            removed += self.conn.execute(
                "DELETE FROM memory_history WHERE memory_id = ? AND purge_after IS NOT NULL"
                " AND purge_after <= ?",
                (memory_id, at),
            ).rowcount
        return removed
