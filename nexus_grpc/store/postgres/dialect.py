"""PostgreSQL's side of store/dialect.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nexus_grpc.store.postgres import keyword_search

# PostgreSQL allows one recursive term: both directions are one lateral step.
_NEIGHBORHOOD = """
WITH RECURSIVE walk(id, depth) AS (
    SELECT ?::bigint, 0
    UNION
    SELECT n.id, w.depth + 1 FROM walk w CROSS JOIN LATERAL (
        SELECT r.to_id AS id FROM relationships r WHERE r.from_id = w.id{when}
        UNION ALL
        SELECT r.from_id FROM relationships r WHERE r.to_id = w.id{when}
    ) n
    WHERE w.depth < ?
)
SELECT DISTINCT id FROM walk
"""


class PostgresDialect:
    name = "postgresql"
    json_ints = "(SELECT value::bigint AS value FROM json_array_elements_text(?::json) AS t(value))"
    json_texts = "(SELECT value FROM json_array_elements_text(?::json) AS t(value))"
    no_limit: int | None = None
    # PostgreSQL has no CROSS JOIN with ON, and plans the order itself.
    pinned_join = "JOIN"
    greatest = "GREATEST"
    find = "strpos"
    newline = "chr(10)"
    schema_table = "nexus_schema"
    # Many instances claim from one queue: a running job is leased.
    leases_jobs = True

    def tail(self, column: str, chars: str) -> str:
        return f"right({column}, {chars})"

    def whole_times(self, column: str) -> str:
        return f"CAST(FLOOR({column} / ?) AS BIGINT)"

    # Keyword search is the backend's own (store/postgres/keyword_search.py).
    episode_keyword_search = staticmethod(keyword_search.episode_keyword_search)
    episode_snippets = staticmethod(keyword_search.episode_snippets)
    episode_scope_sample = staticmethod(keyword_search.episode_scope_sample)
    memory_keyword_search = staticmethod(keyword_search.memory_keyword_search)
    keyword_matching = staticmethod(keyword_search.keyword_matching)

    def neighborhood(
        self, conn: Any, entity_id: int, depth: int, when: str, times: Sequence[float]
    ) -> list[int]:
        walk = conn.execute(_NEIGHBORHOOD.format(when=when), (entity_id, *times, *times, depth))
        return [r[0] for r in walk]

    def lock_for_transaction(self, conn: Any, key: str) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (key,))

    def announce(self, conn: Any, channel: str, payload: str) -> None:
        # Delivered when (and only if) the transaction commits, to every
        # instance listening.
        conn.execute("SELECT pg_notify(?, ?)", (channel, payload))


POSTGRES = PostgresDialect()
