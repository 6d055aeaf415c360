"""Connections, group commit and read pools over aiosqlite.

Writes go through one writer connection fed by a queue.  The writer takes
every write waiting in the queue, runs them in one ``BEGIN IMMEDIATE``
transaction (each inside its own SAVEPOINT, so one failing write rolls back
alone) and commits once: concurrent writers share one fsync (group commit),
and two coroutines' transactions can never interleave on the connection.

Each write or read is a synchronous function run on the connection's own
thread in a single hop (aiosqlite's ``_execute``), rather than one hop per
statement: a CreateEpisode is four statements, and hopping per statement
costs more than the statements themselves.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import CANNOT_WRITE, Conflict, StoreError, StoreUnavailable
from nexus_grpc.core.tenancy import DEFAULT_TENANT
from nexus_grpc.errors import Unavailable
from nexus_grpc.store import keyword_index
from nexus_grpc.store.sqlite.connection import SqliteConnection
from nexus_grpc.store.sqlite.migrations import migrate
from nexus_grpc.store.unit_of_work import SqlUnitOfWork

log = logging.getLogger(__name__)
T = TypeVar("T")
WriteFn = Callable[[sqlite3.Connection], Any]

# Bounds one transaction, so a flood of writers cannot grow a batch (and its
# latency) without limit.
MAX_BATCH = 256


# SQLite's primary result codes that mean the file, not the statement, is at
# fault: I/O error, disk full, read-only, cannot open, no permission, corrupt.
_STORAGE_CODES = frozenset(
    {
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
    }
)


def storage_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the file failing (a full disk, an I/O error, a
    read-only file) rather than a statement's own error."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.Error) and code is not None and code & 0xFF in _STORAGE_CODES


def translated(exc: BaseException) -> BaseException:
    """sqlite3's error as the store's own (core/storage.py), chained to it: no
    driver exception crosses the seam. Others are returned as they are."""
    if not isinstance(exc, sqlite3.Error):
        return exc
    mine: BaseException = (
        Conflict(str(exc)) if isinstance(exc, sqlite3.IntegrityError) else StoreError(str(exc))
    )
    mine.__cause__ = exc
    return mine


@dataclass
class _Write:
    fn: WriteFn
    future: asyncio.Future[Any]
    #: Run alone on the writer, outside any transaction (a WAL checkpoint).
    bare: bool = False


#: Pages one step of a scrub's keyword-index merge writes: about 0.1 s of the
#: writer on 2 cores, so live writes wait at most that long behind it.
SCRUB_MERGE_PAGES = 200


def _in_caller_context(fn: Callable[[sqlite3.Connection], T]) -> Callable[[sqlite3.Connection], T]:
    """``fn`` bound to the calling task's context variables.

    Work runs on aiosqlite's threads, which do not inherit the caller's
    context; the caller's tenant (core.tenancy) must reach every query a
    call makes, including those decided inside ``fn``.
    """
    ctx = contextvars.copy_context()
    return lambda conn: ctx.run(fn, conn)


def _configure(conn: sqlite3.Connection, synchronous: str, busy_timeout_ms: int) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    conn.execute("PRAGMA temp_store=MEMORY")
    conn.execute("PRAGMA cache_size=-32000")
    # A deleted row's bytes are overwritten with zeros in its page and in the
    # freed pages, not left for the file to carry (docs/privacy.md). Many
    # builds default to it; this one does not rely on that.
    conn.execute("PRAGMA secure_delete=ON")


def _run_batch(conn: sqlite3.Connection, fns: list[WriteFn]) -> list[tuple[bool, Any]]:
    """Run writes in one transaction; each gets its result or its exception."""
    results: list[tuple[bool, Any]] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for fn in fns:
            conn.execute("SAVEPOINT w")
            try:
                value = fn(conn)
            except BaseException as exc:  # noqa: BLE001 - handed back to its caller
                conn.execute("ROLLBACK TO w")
                conn.execute("RELEASE w")
                results.append((False, exc))
            else:
                conn.execute("RELEASE w")
                results.append((True, value))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return results


class Database:
    def __init__(
        self,
        path: Path,
        *,
        synchronous: str = "FULL",
        readers: int = 2,
        busy_timeout_ms: int = 5000,
        default_tenant: str = DEFAULT_TENANT,
    ) -> None:
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = path
        self.synchronous = synchronous.upper()
        self._reader_count = max(1, readers)
        self._busy_timeout_ms = busy_timeout_ms
        self._writer: aiosqlite.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._reader_cycle: itertools.cycle[aiosqlite.Connection] | None = None
        self._queue: asyncio.Queue[_Write | None] = asyncio.Queue()
        self._writer_task: asyncio.Task[None] | None = None
        self.default_tenant = default_tenant
        self.schema_version = 0
        self.commits = 0
        self.write_failure: str | None = None

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._writer = await self._connect()
            self.schema_version = await self._writer._execute(
                migrate, self._writer._conn, self.default_tenant
            )
            self._readers = [await self._connect() for _ in range(self._reader_count)]
        except sqlite3.Error as exc:
            await self.close()
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            # Each aiosqlite connection is a thread: one left open keeps the
            # process alive after a failed start (a corrupt file, a schema
            # from the future), with no listener and no exit code.
            await self.close()
            raise
        self._reader_cycle = itertools.cycle(self._readers)
        self._writer_task = asyncio.create_task(self._write_loop(), name="sqlite-writer")

    async def _connect(self) -> aiosqlite.Connection:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves.
        conn = await aiosqlite.connect(
            str(self.path), isolation_level=None, factory=SqliteConnection
        )
        conn.row_factory = sqlite3.Row
        try:
            await conn._execute(_configure, conn._conn, self.synchronous, self._busy_timeout_ms)
        except BaseException:
            await conn.close()  # its thread must not outlive a failed start
            raise
        return conn

    async def close(self) -> None:
        if self._writer_task is not None:
            await self._queue.put(None)
            await self._writer_task
            self._writer_task = None
        for conn in [*self._readers, *([self._writer] if self._writer else [])]:
            await conn.close()
        self._readers = []
        self._writer = None

    async def write(self, fn: Callable[[UnitOfWork], T]) -> T:
        """Run ``fn`` on the repositories of a shared transaction; returns once
        it is committed."""
        return await self.write_sql(lambda conn: fn(SqlUnitOfWork(conn)))

    async def read(self, fn: Callable[[UnitOfWork], T]) -> T:
        """Run ``fn`` on the repositories of a read connection."""
        return await self.read_sql(lambda conn: fn(SqlUnitOfWork(conn)))

    async def read_in_transaction(self, fn: Callable[[UnitOfWork], T]) -> T:
        """Like read, but several statements see one snapshot."""
        return await self.read_sql_in_transaction(lambda conn: fn(SqlUnitOfWork(conn)))

    async def write_sql(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a shared transaction on the connection itself (the
        store's own upkeep and the operator commands); returns once it is
        committed."""
        if self._writer_task is None:
            raise RuntimeError("database is not open")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Write(_in_caller_context(fn), future))
        return await future

    async def scrub(self) -> bool:
        """Make deleted rows' bytes leave the files (docs/privacy.md): merge
        each keyword index into one segment, which drops the deleted rows'
        entries that its segments still hold (SQLite 3.40's FTS5 has no
        secure-delete), in steps that interleave with live writes; then
        checkpoint the WAL into the database and truncate it, which drops the
        old page images. False when readers held the WAL and it could not be
        truncated yet (try again)."""
        for table in keyword_index.TABLES:

            def step(conn: sqlite3.Connection, table: str = table) -> bool:
                return keyword_index.merge_all_step(conn, table, SCRUB_MERGE_PAGES)

            while await self.write_sql(step):
                pass
        busy = await self._bare(
            lambda c: int(c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
        )
        return busy == 0

    async def _bare(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on the writer between transactions."""
        if self._writer_task is None:
            raise RuntimeError("database is not open")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Write(_in_caller_context(fn), future, bare=True))
        return await future

    async def read_sql(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on a read connection (a consistent WAL snapshot per statement)."""
        assert self._reader_cycle is not None, "database is not open"
        conn = next(self._reader_cycle)
        try:
            return await conn._execute(_in_caller_context(fn), conn._conn)
        except sqlite3.Error as exc:
            raise translated(exc) from exc

    async def read_sql_in_transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Like read_sql, but several statements see one snapshot."""

        def wrapped(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                conn.execute("COMMIT")

        return await self.read_sql(wrapped)

    async def _write_loop(self) -> None:
        assert self._writer is not None
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < MAX_BATCH and not self._queue.empty():
                item = self._queue.get_nowait()
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            live = [w for w in batch if not w.future.cancelled()]
            for bare in [w for w in live if w.bare]:
                await self._run_bare(bare)
            live = [w for w in live if not w.bare]
            if not live:
                continue
            try:
                started = time.perf_counter()
                results = await self._writer._execute(
                    _run_batch, self._writer._conn, [w.fn for w in live]
                )
                self.commits += 1
                elapsed = time.perf_counter() - started
                if elapsed > 0.5:
                    log.warning("slow commit: %d writes in %.3fs", len(live), elapsed)
            except BaseException as exc:  # the commit itself failed: every write failed
                log.exception("commit of %d writes failed", len(live))
                failed = self._failed(exc)
                for w in live:
                    if not w.future.done():
                        w.future.set_exception(failed)
                continue
            if all(ok or not storage_failure(value) for ok, value in results):
                self.write_failure = None
            for w, (ok, value) in zip(live, results, strict=True):
                if w.future.done():
                    continue
                if ok:
                    w.future.set_result(value)
                else:
                    w.future.set_exception(self._failed(value))

    async def _run_bare(self, item: _Write) -> None:
        assert self._writer is not None
        try:
            result = await self._writer._execute(item.fn, self._writer._conn)
        except BaseException as exc:
            if not item.future.done():
                item.future.set_exception(translated(exc))
            return
        if not item.future.done():
            item.future.set_result(result)

    def _failed(self, exc: BaseException) -> BaseException:
        """What a failed write's caller gets: a storage failure as UNAVAILABLE
        saying the store cannot write (recorded for health until a write
        succeeds), any other error of the driver as the store's own
        (``translated``), anything else as it was raised."""
        if not storage_failure(exc):
            return translated(exc)
        reason = f"{CANNOT_WRITE}: {exc}"
        if self.write_failure is None:
            log.error("%s (%s); health is NOT_SERVING until a write succeeds", reason, self.path)
        self.write_failure = reason
        # The file's path stays in the log: a client has no use for it.
        failed = Unavailable(
            f"{reason} (the disk is full or read-only, or failing); nothing was written;"
            " retry with backoff"
        )
        failed.__cause__ = exc
        return failed
