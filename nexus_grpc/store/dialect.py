"""Which database a store function is running on.

The store's functions are shared by SQLite and PostgreSQL; where the SQL
cannot be (full-text search, a few functions, job leases), the function
branches on ``is_postgres(conn)``, so all SQL stays in store/.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from nexus_grpc.core.storage import Conflict


def is_postgres(conn: Any) -> bool:
    """Whether ``conn`` is a PostgreSQL connection (store/postgres.py's)."""
    return getattr(conn, "dialect", None) == "postgresql"


def json_ints(conn: Any) -> str:
    """A table of one column, ``value``, holding the integers of a JSON array
    bound as one parameter: one parameter, not one per id, whatever the count."""
    if is_postgres(conn):
        return "(SELECT value::bigint AS value FROM json_array_elements_text(?::json) AS t(value))"
    return "json_each(?)"


def json_texts(conn: Any) -> str:
    """Like ``json_ints``, for an array of strings."""
    if is_postgres(conn):
        return "(SELECT value FROM json_array_elements_text(?::json) AS t(value))"
    return "json_each(?)"


def no_limit(conn: Any) -> int | None:
    """What ``LIMIT ?`` takes to mean no limit."""
    return None if is_postgres(conn) else -1


def pinned_join(conn: Any) -> str:
    """A join whose left side stays the outer loop: SQLite's CROSS JOIN ... ON
    fixes the order (its planner otherwise walks a whole index); PostgreSQL
    has no CROSS JOIN with ON and plans the order itself."""
    return "JOIN" if is_postgres(conn) else "CROSS JOIN"


#: A write that broke a rule of the schema, as each database says it inside
#: the store: SQLite's driver raises its own class, PostgreSQL's arrives as
#: the store's ``Conflict`` (store/postgres.py). Outside the store, both are
#: ``Conflict`` (store/db.py translates SQLite's at the seam).
INTEGRITY_ERRORS = (sqlite3.IntegrityError, Conflict)
