"""The system of record: SQLite (through aiosqlite) or PostgreSQL (psycopg).

Every statement lives here, in a synchronous method of a repository's class
on one ``core.storage.Connection`` (store/unit_of_work.py); ``Database``
(SQLite) and ``PostgresDatabase`` run them on their connections' threads
(see sqlite/database.py and postgres/database.py). Both are a
``core.storage.Database``: the domain never learns which it has.
"""

from nexus_grpc.store.sqlite.database import Database

__all__ = ["Database"]
