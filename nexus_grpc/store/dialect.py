"""Which database a store function is running on.

The store's functions are shared by SQLite and PostgreSQL; where the SQL
cannot be (full-text search, a few functions, job leases), the function
branches on ``is_postgres(conn)``, so all SQL stays in store/.
"""

from __future__ import annotations

from typing import Any


def is_postgres(conn: Any) -> bool:
    """Whether ``conn`` is a PostgreSQL connection (store/postgres.py's)."""
    return getattr(conn, "dialect", None) == "postgresql"
