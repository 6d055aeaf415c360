"""The meta table: small facts about the database itself (e.g. the embedder)."""

from __future__ import annotations

from nexus_grpc.store import dialect
from nexus_grpc.store.sql import OnConnection


class SqlMeta(OnConnection):
    """``MetaRepository`` on one connection."""

    __slots__ = ()

    def get(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def probe(self) -> int:
        """A read of the schema: health's proof that the database answers queries."""
        table = dialect.of(self.conn).schema_table
        return int(self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def touch(self, at: float) -> None:
        """A write of one small row: health's proof, while writes have been
        failing, that the database takes writes again."""
        self.put("write_probe", repr(at))
