"""The system of record: SQLite through aiosqlite.

Every statement lives in a synchronous function taking a ``sqlite3.Connection``;
``Database`` runs those functions on its connections' threads (see db.py).
"""

from nexus_grpc.store.db import Database

__all__ = ["Database"]
