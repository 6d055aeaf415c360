"""Answered selections, by request_id: what makes SelectMemories safe to retry.

SelectMemories writes: each selected memory gets a usage row and its
use_count goes up. A client that lost the answer and retries would count the
selection twice, and (the used memories now ranking lower in the thread) be
answered with another one. A call with a ``request_id`` therefore keeps its
answer here, written in the transaction that records its usage; a retry is
answered from it and records nothing. Rows are kept for ``KEEP_SECONDS``
(a retry comes within seconds): each new one removes a few past that.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from nexus_grpc.core.records import SelectionAnswer, SelectionKey, SelectionPick
from nexus_grpc.store.sql import OnConnection, now

#: How long a selection's answer stays replayable.
KEEP_SECONDS = 86_400.0
#: Rows past KEEP_SECONDS removed with each new one (more than one is made).
PURGE_BATCH = 16


class SelectionRows(OnConnection):
    """The part of ``MemoryRepository`` whose rows this module holds, on one
    connection (``SqlMemories`` in store/unit_of_work.py is the whole)."""

    __slots__ = ()

    def find_selection(self, key: SelectionKey) -> tuple[str, SelectionAnswer] | None:
        """The stored answer under ``key`` and the digest of the request it
        answered; None when there is none (or it is past KEEP_SECONDS)."""
        row = self.conn.execute(
            "SELECT request_sha256, answer FROM memory_selections WHERE tenant = ? AND user_id = ?"
            " AND project_id = ? AND request_id = ? AND created_at >= ?",
            (*key.values(), now() - KEEP_SECONDS),
        ).fetchone()
        if row is None:
            return None
        data = json.loads(row[1])
        answer = SelectionAnswer(
            [SelectionPick(**p) for p in data["picks"]],
            data["method"],
            data["degraded_reason"],
            data["title_batches"],
        )
        return str(row[0]), answer

    def insert_selection(self, key: SelectionKey, digest: str, answer: SelectionAnswer) -> None:
        """Keep ``answer`` under ``key`` (a row past KEEP_SECONDS under the same
        key gives way), and remove a few others past it."""
        at = now()
        cutoff = at - KEEP_SECONDS
        self.conn.execute(
            "DELETE FROM memory_selections WHERE id IN (SELECT id FROM memory_selections"
            " WHERE created_at < ? ORDER BY created_at LIMIT ?)",
            (cutoff, PURGE_BATCH),
        )
        self.conn.execute(
            "DELETE FROM memory_selections WHERE tenant = ? AND user_id = ? AND project_id = ?"
            " AND request_id = ? AND created_at < ?",
            (*key.values(), cutoff),
        )
        self.conn.execute(
            "INSERT INTO memory_selections (tenant, user_id, project_id, request_id,"
            " request_sha256, answer, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*key.values(), digest, json.dumps(asdict(answer)), at),
        )
