"""SQLite connections as the store opens them: its dialect attached."""

from __future__ import annotations

import sqlite3
from typing import Any

from nexus_grpc.store.sqlite import keyword_search
from nexus_grpc.store.sqlite.dialect import SQLITE


class SqliteConnection(sqlite3.Connection):
    """``sqlite3.Connection`` that says it is SQLite's (store/dialect.py), with
    the functions the store's statements call."""

    dialect = SQLITE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        keyword_search.register_functions(self)


def connect(database: Any, **kwargs: Any) -> SqliteConnection:
    """``sqlite3.connect`` for the store: a ``SqliteConnection``."""
    return sqlite3.connect(database, factory=SqliteConnection, **kwargs)  # type: ignore[return-value]
