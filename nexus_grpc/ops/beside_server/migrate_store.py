"""``nexus-grpc migrate-store``: move an embedded dataset into PostgreSQL.

Reads the SQLite file of ``--data-dir`` (read-only: the embedded server may
keep its copy) and copies every table into the database at
``--database-url`` with progress, then verifies that each table holds as
many rows there as here. Safe to run again after an interruption: each
table resumes after the last row it copied, and rows already there are
skipped. The vector index is not copied: every episode, entity, summary and
memory gets an index job, and the servers on PostgreSQL fill pgvector (or
the Qdrant of ``--qdrant-url``) from those.
"""

from __future__ import annotations

import functools
import time
from typing import Any, TextIO

from nexus_grpc.core.storage import Connection
from nexus_grpc.runtime.config import Settings
from nexus_grpc.store import copy
from nexus_grpc.store.postgres.database import PostgresDatabase, mask_url

BATCH = 1000


class MigrateError(RuntimeError):
    """The copy cannot start or did not verify; the message says which."""


async def migrate_store(settings: Settings, progress: TextIO) -> dict[str, int]:
    """Copy, verify, and return the rows per table."""
    if not settings.database_url:
        raise MigrateError("--database-url is required: the PostgreSQL database to copy into")
    try:
        source = copy.open_source(settings.sqlite_path)
    except ValueError as exc:
        raise MigrateError(f"{exc} (--data-dir {settings.data_dir})") from None
    target = PostgresDatabase(settings.database_url, default_tenant=settings.default_tenant)
    try:
        await target.open()
    except OSError as exc:
        source.close()
        raise MigrateError(f"cannot open {mask_url(settings.database_url)}: {exc}") from exc
    counts: dict[str, int] = {}
    try:
        await _claim_target(target, str(settings.sqlite_path.resolve()), settings.database_url)
        for table in copy.TABLES:
            counts[table.name] = await _copy_table(source, target, table, progress)
        await target.write_sql(copy.queue_indexing)
        mismatched = []
        for table in copy.TABLES:
            have = await target.read_sql(functools.partial(copy.count, table=table.name))
            # Index jobs were added above: the copy holds at least the source's.
            if have != counts[table.name] and not (
                table.name == "jobs" and have >= counts[table.name]
            ):
                mismatched.append(f"{table.name}: {counts[table.name]} here, {have} there")
        if mismatched:
            raise MigrateError(
                "the copy does not match (was the target written to by a server meanwhile?): "
                + "; ".join(mismatched)
            )
        progress.write(
            f"verified: every table of {settings.sqlite_path} is in"
            f" {mask_url(settings.database_url)}\n"
        )
        return counts
    finally:
        source.close()
        await target.close()


async def _claim_target(target: PostgresDatabase, source: str, url: str) -> None:
    """Copy only into an empty database, or into this source's own earlier copy:
    resuming into anything else would mix two datasets."""

    def claim(conn: Connection) -> None:
        earlier = copy.source_of(conn)
        if earlier is None and copy.holds_data(conn):
            raise MigrateError(
                f"{mask_url(url)} already holds data that migrate-store did not copy;"
                " copy into an empty database"
            )
        if earlier is not None and earlier != source:
            raise MigrateError(f"{mask_url(url)} holds a copy of {earlier}, not of {source}")
        copy.begin(conn, source)

    await target.write_sql(claim)


async def _copy_table(
    source: Connection, target: PostgresDatabase, table: copy.Table, progress: TextIO
) -> int:
    here = copy.sqlite_columns(source, table.name)
    there = await target.read_sql(lambda c: copy.postgres_columns(c, table.name))
    columns = [c for c in there if c in here and c not in copy.NOT_COPIED]
    total = copy.count(source, table.name)
    after: tuple[Any, ...] | None = await target.read_sql(lambda c: copy.last_key(c, table))
    # Resuming: the rows up to ``after`` are already there.
    done = 0 if after is None else copy.count_through(source, table, after)
    started = time.monotonic()
    while True:
        rows = copy.read_batch(source, table, columns, after, BATCH)
        if not rows:
            break
        await target.write_sql(
            functools.partial(copy.write_batch, table=table, columns=columns, rows=rows)
        )
        done += len(rows)
        key_at = [columns.index(k) for k in table.key]
        after = tuple(rows[-1][i] for i in key_at)
        rate = done / max(time.monotonic() - started, 1e-6)
        progress.write(f"\r{table.name:<22} {done}/{total} rows {rate:,.0f}/s")
        progress.flush()
    await target.write_sql(lambda c: copy.advance_identity(c, table))
    progress.write(f"\r{table.name:<22} {total}/{total} rows copied\n")
    return total
