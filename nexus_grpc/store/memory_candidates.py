"""What an episode's extraction proposed as memories, kept for its formation
job: written in the extraction's transaction, read (and read again on a
re-run) by formation, gone with the episode."""

from __future__ import annotations

import json
from typing import Any

from nexus_grpc.store.sql import OnConnection, now


class MemoryCandidateRows(OnConnection):
    """The part of ``MemoryRepository`` whose rows this module holds, on one
    connection (``SqlMemories`` in store/unit_of_work.py is the whole)."""

    __slots__ = ()

    def put_candidates(self, episode_id: int, candidates: list[dict[str, Any]]) -> None:
        self.conn.execute(
            "INSERT INTO memory_candidates (episode_id, candidates, created_at) VALUES (?, ?, ?)"
            " ON CONFLICT (episode_id) DO UPDATE SET candidates = excluded.candidates,"
            " created_at = excluded.created_at",
            (episode_id, json.dumps(candidates), now()),
        )

    def candidates_of(self, episode_id: int) -> list[dict[str, Any]] | None:
        row = self.conn.execute(
            "SELECT candidates FROM memory_candidates WHERE episode_id = ?", (episode_id,)
        ).fetchone()
        return None if row is None else list(json.loads(row[0]))
