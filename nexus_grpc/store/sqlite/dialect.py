"""SQLite's side of store/dialect.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nexus_grpc.core.models import TimeWindow
from nexus_grpc.store.sqlite import keyword_search

# SQLite allows two recursive terms: one walks edges forwards, one backwards.
_NEIGHBORHOOD = """
WITH RECURSIVE walk(id, depth) AS (
    SELECT ?, 0
    UNION
    SELECT r.to_id, w.depth + 1 FROM walk w JOIN relationships r ON r.from_id = w.id
    WHERE w.depth < ?{when}
    UNION
    SELECT r.from_id, w.depth + 1 FROM walk w JOIN relationships r ON r.to_id = w.id
    WHERE w.depth < ?{when}
)
SELECT DISTINCT id FROM walk
"""


class SqliteDialect:
    name = "sqlite"
    json_ints = "json_each(?)"
    json_texts = "json_each(?)"
    no_limit: int | None = -1
    # SQLite's planner otherwise walks a whole index for the right side.
    pinned_join = "CROSS JOIN"
    greatest = "MAX"
    find = "instr"
    newline = "char(10)"
    schema_table = "sqlite_master"
    # One server per file: a running job is that server's, no lease needed.
    leases_jobs = False

    def tail(self, column: str, chars: str) -> str:
        return f"substr({column}, -{chars})"

    def whole_times(self, column: str) -> str:
        return f"CAST({column} / ? AS INTEGER)"  # positive: truncation is the floor

    def episode_keyword_search(
        self,
        conn: Any,
        match: str,
        session_ids: Sequence[int] | None,
        limit: int,
        window: TimeWindow | None,
    ) -> list[tuple[int, float]]:
        return keyword_search.episode_keyword_search(conn, match, session_ids, limit, window)

    def episode_snippets(self, conn: Any, match: str, ids: Sequence[int]) -> dict[int, str]:
        return keyword_search.episode_snippets(conn, match, ids)

    def episode_scope_sample(self, conn: Any, session_ids: Sequence[int], limit: int) -> list[str]:
        return keyword_search.episode_scope_sample(conn, session_ids, limit)

    def memory_keyword_search(
        self,
        conn: Any,
        match: str,
        project_id: int,
        user_id: str,
        where: str,
        params: Sequence[Any],
        limit: int,
    ) -> list[tuple[int, float]]:
        return keyword_search.memory_keyword_search(
            conn, match, project_id, user_id, where, params, limit
        )

    def neighborhood(
        self, conn: Any, entity_id: int, depth: int, when: str, times: Sequence[float]
    ) -> list[int]:
        walk = conn.execute(
            _NEIGHBORHOOD.format(when=when), (entity_id, depth, *times, depth, *times)
        )
        return [r[0] for r in walk]

    def lock_for_transaction(self, conn: Any, key: str) -> None:
        # One writer connection runs every write transaction in turn.
        del conn, key

    def announce(self, conn: Any, channel: str, payload: str) -> None:
        # One process: its watchers hear of a commit from the process itself.
        del conn, channel, payload


SQLITE = SqliteDialect()
