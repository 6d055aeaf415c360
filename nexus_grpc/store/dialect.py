"""What differs between the two databases, behind one interface.

The store's repositories are shared by SQLite and PostgreSQL (one SQL for
both wherever the databases agree); where they cannot agree (keyword search,
the graph walk, a few functions, locks and notifications), a repository asks
the connection's dialect, which each backend implements once
(store/sqlite/dialect.py, store/postgres/dialect.py) and attaches to every
connection it opens. Nothing is branched on at run time: the dialect is
chosen when the connection is made.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Protocol

from nexus_grpc.core.models import TimeWindow
from nexus_grpc.core.storage import Conflict


class Dialect(Protocol):
    #: "sqlite" or "postgresql".
    name: str
    #: A table of one column, ``value``, holding the integers of a JSON array
    #: bound as one parameter: one parameter, not one per id, whatever the count.
    json_ints: str
    #: Like ``json_ints``, for an array of strings.
    json_texts: str
    #: What ``LIMIT ?`` takes to mean no limit.
    no_limit: int | None
    #: A join whose left side stays the outer loop (SQLite's CROSS JOIN ... ON
    #: fixes the order; PostgreSQL plans the order itself).
    pinned_join: str
    #: The larger of two values (a scalar function of two arguments).
    greatest: str
    #: Where a text holds a part (a function of (text, part); 0: nowhere).
    find: str
    #: A newline character, in SQL.
    newline: str
    #: A table every schema holds: health's proof that the database answers.
    schema_table: str
    #: Whether several servers share the job queue, so a running job is
    #: leased and taken back when its lease runs out (store/jobs.py).
    leases_jobs: bool

    def tail(self, column: str, chars: str) -> str:
        """SQL for the last ``chars`` (SQL: a number or a parameter) characters of ``column``."""
        ...

    def whole_times(self, column: str) -> str:
        """SQL for how many whole times a parameter goes into ``column`` (a
        positive number): the floor of their quotient, as an integer."""
        ...

    def episode_keyword_search(
        self,
        conn: Any,
        match: str,
        session_ids: Sequence[int] | None,
        limit: int,
        window: TimeWindow | None,
    ) -> list[tuple[int, float]]: ...

    def episode_snippets(self, conn: Any, match: str, ids: Sequence[int]) -> dict[int, str]: ...

    def episode_scope_sample(
        self, conn: Any, session_ids: Sequence[int], limit: int
    ) -> list[str]: ...

    def memory_keyword_search(
        self,
        conn: Any,
        match: str,
        project_id: int,
        user_id: str,
        where: str,
        params: Sequence[Any],
        limit: int,
    ) -> list[tuple[int, float]]: ...

    def keyword_matching(self, conn: Any, kind: str, match: str, ids: Sequence[int]) -> set[int]:
        """The ids among ``ids`` of ``kind`` ("episodes", "memories") that the
        keyword query ``match`` matches."""
        ...

    def neighborhood(
        self, conn: Any, entity_id: int, depth: int, when: str, times: Sequence[float]
    ) -> list[int]:
        """The ids within ``depth`` edges of ``entity_id`` (``when``: a
        condition on the edges, alias ``r``, with its ``times``)."""
        ...

    def lock_for_transaction(self, conn: Any, key: str) -> None:
        """Serialise transactions that name ``key`` until this one ends."""
        ...

    def announce(self, conn: Any, channel: str, payload: str) -> None:
        """Tell every instance listening on ``channel``, once this commits."""
        ...


def of(conn: Any) -> Dialect:
    """The dialect of a connection the store opened (each backend attaches
    its own: store/sqlite/connection.py, store/postgres/database.py)."""
    try:
        return conn.dialect  # type: ignore[no-any-return]
    except AttributeError:
        raise TypeError(
            f"{type(conn).__name__} was not opened by the store: open SQLite with"
            " store.sqlite.connection.connect"
        ) from None


def json_ints(conn: Any) -> str:
    return of(conn).json_ints


def json_texts(conn: Any) -> str:
    return of(conn).json_texts


def no_limit(conn: Any) -> int | None:
    return of(conn).no_limit


def pinned_join(conn: Any) -> str:
    return of(conn).pinned_join


#: A write that broke a rule of the schema, as each database says it inside
#: the store: SQLite's driver raises its own class, PostgreSQL's arrives as
#: the store's ``Conflict`` (store/postgres/database.py). Outside the store, both are
#: ``Conflict`` (store/sqlite/database.py translates SQLite's at the seam).
INTEGRITY_ERRORS = (sqlite3.IntegrityError, Conflict)
