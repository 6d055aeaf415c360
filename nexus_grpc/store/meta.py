"""The meta table: small facts about the database itself (e.g. the embedder)."""

from __future__ import annotations

from nexus_grpc.core.storage import Connection
from nexus_grpc.store import dialect


def get(conn: Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def put(conn: Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?)"
        " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def probe(conn: Connection) -> int:
    """A read of the schema: health's proof that the database answers queries."""
    table = dialect.of(conn).schema_table
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def touch(conn: Connection, at: float) -> None:
    """A write of one small row: health's proof, while writes have been
    failing, that the database takes writes again."""
    put(conn, "write_probe", repr(at))
