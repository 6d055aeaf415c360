"""Copying an embedded SQLite dataset into PostgreSQL (``nexus-grpc migrate-store``).

Rows keep their ids, so every id a client holds (a session, an episode, an
event cursor) means the same row afterwards. Tables are copied parents
first, in id order, in batches; each batch is one PostgreSQL transaction that
skips rows already there (``ON CONFLICT DO NOTHING``), so a copy that was
interrupted is resumed by running it again, from the last id copied.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nexus_grpc.core.storage import Connection
from nexus_grpc.store import jobs
from nexus_grpc.store.sqlite.connection import connect
from nexus_grpc.store.sqlite.migrations import LATEST_VERSION as SQLITE_VERSION


@dataclass(frozen=True)
class Table:
    name: str
    #: The keyset the batches walk (a unique key, in order).
    key: tuple[str, ...] = ("id",)
    #: Whether ``id`` is an identity whose sequence must pass the copied ids.
    identity: bool = True


#: Parents before children (foreign keys hold at every commit).
TABLES: tuple[Table, ...] = (
    Table("meta", key=("key",), identity=False),
    Table("projects"),
    Table("sessions"),
    Table("episodes"),
    Table("entities"),
    Table("entity_aliases"),
    Table(
        "entity_tokens",
        key=("project_id", "session_id", "type", "token", "entity_id"),
        identity=False,
    ),
    Table("entity_distinctions", key=("a_id", "b_id"), identity=False),
    Table("entity_merges"),
    Table("relationships"),
    Table("relationship_evidence"),
    Table("entity_episodes", key=("entity_id", "episode_id"), identity=False),
    Table("summaries"),
    Table("memories"),
    Table("memory_usage"),
    Table("memory_selections"),
    Table("memory_history"),
    Table("memory_candidates", key=("episode_id",), identity=False),
    Table("extraction_events"),
    Table("jobs"),
)

#: PostgreSQL columns that are not copied: computed there, or only meaningful there.
NOT_COPIED = {"fts", "lease_until", "leased_by"}


def sqlite_columns(conn: Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def postgres_columns(conn: Connection, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [r[0] for r in rows]


#: A meta row in the target naming the source: a re-run recognises its own copy.
MARKER = "migrate_store.source"


def count(conn: Connection, table: str) -> int:
    """Rows of ``table`` (of meta: not counting the copy's own marker)."""
    if table == "meta":
        row = conn.execute("SELECT COUNT(*) FROM meta WHERE key != ?", (MARKER,)).fetchone()
        return int(row[0])
    return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def source_of(conn: Connection) -> str | None:
    """The source a previous run copied from (PostgreSQL); None if none began."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (MARKER,)).fetchone()
    return None if row is None else str(row[0])


def holds_data(conn: Connection) -> bool:
    """Whether the target has rows of its own (a server already ran on it)."""
    return any(
        conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None
        for table in ("projects", "sessions", "memories", "entities")
    )


def begin(conn: Connection, source: str) -> None:
    """Mark the target as this source's copy (PostgreSQL), before any row."""
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
        (MARKER, source),
    )


def count_through(conn: Connection, table: Table, key: tuple[Any, ...]) -> int:
    """Rows of ``table`` whose key is at most ``key``."""
    columns = ", ".join(table.key)
    marks = ", ".join("?" * len(table.key))
    row = conn.execute(
        f"SELECT COUNT(*) FROM {table.name} WHERE ({columns}) <= ({marks})", key
    ).fetchone()
    return int(row[0])


def read_batch(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    after: tuple[Any, ...] | None,
    limit: int,
) -> list[tuple[Any, ...]]:
    """Up to ``limit`` rows of ``table`` after the key ``after``, in key order."""
    key = ", ".join(table.key)
    where = ""
    params: tuple[Any, ...] = ()
    if after is not None:
        where = f" WHERE ({key}) > ({', '.join('?' * len(table.key))})"
        params = after
    rows = conn.execute(
        f"SELECT {', '.join(columns)} FROM {table.name}{where} ORDER BY {key} LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [tuple(r) for r in rows]


def write_batch(
    conn: Connection, table: Table, columns: Sequence[str], rows: list[tuple[Any, ...]]
) -> None:
    """Insert rows that are not there yet (PostgreSQL).

    A job that was running in the embedded server runs again here: with no
    lease it would otherwise wait for nobody."""
    if table.name == "jobs":
        state = list(columns).index("state")
        rows = [r[:state] + ("pending" if r[state] == "running" else r[state],) + r[state + 1 :]
                for r in rows]  # fmt: skip
    conn.executemany(
        f"INSERT INTO {table.name} ({', '.join(columns)})"
        f" VALUES ({', '.join('?' * len(columns))}) ON CONFLICT DO NOTHING",
        rows,
    )


def last_key(conn: Connection, table: Table) -> tuple[Any, ...] | None:
    """The largest key already copied (PostgreSQL): where a re-run resumes."""
    key = ", ".join(table.key)
    mine = " WHERE key != ?" if table.name == "meta" else ""
    row = conn.execute(
        f"SELECT {key} FROM {table.name}{mine} ORDER BY {key} DESC LIMIT 1",
        (MARKER,) if mine else (),
    ).fetchone()
    return None if row is None else tuple(row)


def advance_identity(conn: Connection, table: Table) -> None:
    """Move the id sequence past the copied ids (PostgreSQL), so a new row never
    takes an id the embedded store had handed out."""
    if table.identity:
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'),"
            f" GREATEST((SELECT MAX(id) FROM {table.name}), 1))"
        )


def queue_indexing(conn: Connection) -> None:
    """Index jobs for every row with a vector (PostgreSQL): the embedded index
    is not copied; the servers fill pgvector (or Qdrant) from these."""
    for kind, table in (
        (jobs.INDEX_EPISODE, "episodes"),
        (jobs.INDEX_ENTITY, "entities"),
        (jobs.INDEX_SUMMARY, "summaries"),
        (jobs.INDEX_MEMORY, "memories"),
    ):
        jobs.SqlJobs(conn).enqueue_select(kind, f"SELECT id FROM {table}", ())


def open_source(path: Path) -> sqlite3.Connection:
    """The embedded database at ``path``, read-only (its server may keep it
    open); ValueError when it is missing or at another schema version."""
    if not path.is_file():
        raise ValueError(f"no embedded database at {path}")
    conn = connect(f"file:{path}?mode=ro", uri=True)
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version != SQLITE_VERSION:
        conn.close()
        raise ValueError(
            f"{path} is at schema version {version}, this build copies version"
            f" {SQLITE_VERSION}: start `nexus-grpc serve` on it once to migrate it first"
        )
    return conn
