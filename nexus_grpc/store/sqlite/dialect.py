"""SQLite's side of store/dialect.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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

    # Keyword search is the backend's own (store/sqlite/keyword_search.py).
    episode_keyword_search = staticmethod(keyword_search.episode_keyword_search)
    episode_snippets = staticmethod(keyword_search.episode_snippets)
    episode_scope_sample = staticmethod(keyword_search.episode_scope_sample)
    memory_keyword_search = staticmethod(keyword_search.memory_keyword_search)
    keyword_matching = staticmethod(keyword_search.keyword_matching)

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
