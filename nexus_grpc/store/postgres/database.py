"""PostgreSQL as the system of record, behind the same seam as ``Database``.

The domain hands the store synchronous transaction functions
(``fn(conn) -> T``) and never learns which database runs them; this module
runs them on PostgreSQL, so the store's functions and every use case above
them are shared by both stores.  What differs is kept here:

- ``PgConnection`` presents a psycopg connection as the part of the sqlite3
  DB-API the store is written against: ``execute``/``executemany`` with
  ``?`` placeholders, rows read by index or by column name, and
  the store's own errors (``core.storage.Conflict``, ``StoreError``) for
  psycopg's.  SQL that cannot be shared asks the connection's dialect
  (store/dialect.py, store/postgres/dialect.py).
- Writes are not group-committed through one writer, as SQLite's must be:
  PostgreSQL takes concurrent transactions, from this process and from every
  other instance on the same database.  Each write is one transaction on a
  pooled connection.  A write that loses a race on a unique key (two
  instances given the same ``request_id`` at once) runs again: its second
  run reads the winner's committed row and returns it, which is what makes
  retries idempotent across instances.
- Each connection has a thread of its own, as each aiosqlite connection does:
  the store's functions are synchronous, and a connection is never used by
  two threads at once.

psycopg (3) is imported only when a ``--database-url`` is given, so the
embedded default neither needs nor loads it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast

from nexus_grpc.core.redact import mask_url
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import CANNOT_WRITE, Conflict, Connection, StoreError
from nexus_grpc.core.tenancy import DEFAULT_TENANT
from nexus_grpc.errors import Unavailable
from nexus_grpc.store import schema
from nexus_grpc.store.postgres.dialect import POSTGRES
from nexus_grpc.store.postgres.unit_of_work import PostgresUnitOfWork

log = logging.getLogger(__name__)
T = TypeVar("T")

# A write that loses a unique-key race, a serialization failure or a deadlock
# runs again, at most this many times in all.
WRITE_ATTEMPTS = 3


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """``?`` placeholders to psycopg's ``%s``, and a literal ``%`` doubled.

    Question marks inside string literals or quoted names are left alone.
    """
    out: list[str] = []
    quote: str | None = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
            out.append("%%" if ch == "%" else ch)
        elif ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


class _RowBase(tuple):  # type: ignore[type-arg]
    """A row read by index or by column name, as ``sqlite3.Row`` is."""

    __slots__ = ()
    _names: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


@functools.lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type[_RowBase]:
    return type(
        "Row", (_RowBase,), {"__slots__": (), "_names": {n: i for i, n in enumerate(names)}}
    )


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], _RowBase]:
    description = cursor.description
    if description is None:
        return tuple  # type: ignore[return-value]
    cls = _row_class(tuple(d.name for d in description))
    return cls


def _translate_error(exc: Exception) -> Exception:
    """psycopg's error as the store's own (core/storage.py), chained to it."""
    import psycopg

    if isinstance(exc, psycopg.errors.IntegrityError):
        translated: Exception = Conflict(str(exc))
    elif isinstance(exc, psycopg.Error):
        translated = StoreError(str(exc))
    else:
        return exc
    translated.__cause__ = exc
    return translated


class PgCursor:
    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    @property
    def lastrowid(self) -> int:
        raise NotImplementedError(
            "lastrowid has no PostgreSQL equivalent: write INSERT ... RETURNING id"
        )

    def fetchone(self) -> Any:
        return self._cursor.fetchone() if self._cursor.description is not None else None

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall() if self._cursor.description is not None else []

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class PgConnection:
    """A psycopg connection dressed as the sqlite3 subset the store uses."""

    dialect = POSTGRES

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> PgCursor:
        cursor = self.raw.cursor()
        try:
            if params:
                cursor.execute(translate(sql), tuple(params))
            else:
                cursor.execute(sql)
        except Exception as exc:
            raise _translate_error(exc) from exc
        return PgCursor(cursor)

    def executemany(self, sql: str, seq: Any) -> PgCursor:
        rows = [tuple(p) for p in seq]
        cursor = self.raw.cursor()
        if rows:
            try:
                cursor.executemany(translate(sql), rows)
            except Exception as exc:
                raise _translate_error(exc) from exc
        return PgCursor(cursor)

    @property
    def in_transaction(self) -> bool:
        import psycopg

        return bool(self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means the server is unreachable, not that the statement
    was wrong (a psycopg OperationalError, or the class of SQLSTATE 08 and the
    shutdown codes 57P01-57P03)."""
    import psycopg

    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    if isinstance(cause, psycopg.errors.AdminShutdown | psycopg.errors.CrashShutdown):
        return True
    if isinstance(cause, psycopg.errors.CannotConnectNow):
        return True
    if isinstance(cause, psycopg.OperationalError):
        sqlstate = getattr(cause, "sqlstate", None)
        return sqlstate is None or sqlstate.startswith("08")
    return False


def _cannot_write(exc: BaseException) -> bool:
    """Whether ``exc`` means the database cannot write at all, whatever was
    written: out of disk or another resource (class 53), an I/O error
    (58030), or a read-only server (25006: a standby after a failover)."""
    import psycopg

    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    if not isinstance(cause, psycopg.Error):
        return False
    sqlstate = getattr(cause, "sqlstate", None) or ""
    return sqlstate.startswith("53") or sqlstate in ("58030", "25006")


def _retryable(exc: BaseException) -> bool:
    import psycopg

    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    return isinstance(
        cause,
        psycopg.errors.UniqueViolation
        | psycopg.errors.SerializationFailure
        | psycopg.errors.DeadlockDetected,
    )


class _Slot:
    """One pooled connection and the one thread that uses it."""

    def __init__(self, url: str, index: int) -> None:
        self.url = url
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"pg-{index}")
        self.raw: Any = None

    def connect(self) -> Any:
        """On the slot's thread: (re)connect when there is no live connection."""
        import psycopg

        if self.raw is None or self.raw.closed or self.raw.broken:
            if self.raw is not None:
                self.raw.close()
            self.raw = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            self.raw.row_factory = _row_factory
        return self.raw

    def close(self) -> None:
        if self.raw is not None:
            self.raw.close()
            self.raw = None


def _wake(slot: _Slot, channels: Sequence[str]) -> None:
    """On the slot's thread: a NOTIFY on each channel, so its listeners stop
    waiting. Only on a live connection: when the database cannot be reached
    the listeners are not connected either, and end within their wait."""
    import psycopg

    raw = slot.raw
    if raw is None or raw.closed or raw.broken:
        return
    try:
        for channel in channels:
            raw.execute("SELECT pg_notify(%s, '')", (channel,))
    except psycopg.Error as exc:
        log.debug("waking the listeners: %s", exc)


class PostgresDatabase:
    """``Database``'s interface (open, write, read, read_in_transaction,
    close) over a pool of PostgreSQL connections."""

    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 8,
        default_tenant: str = DEFAULT_TENANT,
    ) -> None:
        if not is_postgres_url(url):
            raise ValueError(f"not a PostgreSQL URL: {mask_url(url)}")
        self.url = url
        self.masked_url = mask_url(url)
        self.pool_size = max(2, pool_size)
        self.default_tenant = default_tenant
        self.schema_version = 0
        self.commits = 0
        self.write_failure: str | None = None
        self._slots: list[_Slot] = []
        self._free: asyncio.Queue[_Slot] | None = None
        self._listeners: list[_Listener] = []

    async def open(self) -> None:
        import psycopg

        from nexus_grpc.store.postgres.migrations import migrate

        self._slots = [_Slot(self.url, i) for i in range(self.pool_size)]
        self._free = asyncio.Queue()
        try:
            first = self._slots[0]
            self.schema_version = await self._on(
                first, lambda: migrate(first.connect(), self.default_tenant)
            )
        except psycopg.OperationalError as exc:
            await self.close()
            # OSError: the start fails with one line naming the address, not a traceback.
            raise ConnectionError(f"cannot connect: {_first_line(exc)}") from exc
        except BaseException:
            await self.close()
            raise
        for slot in self._slots:
            self._free.put_nowait(slot)

    async def close(self) -> None:
        # A listener's thread sees its stop flag only when its wait for a
        # notification ends (0.5 s at most): a NOTIFY on its channel ends the
        # wait now, and the joins run off the event loop, which they would
        # otherwise hold still.
        for listener in self._listeners:
            listener.ask_to_stop()
        if self._listeners and self._slots:
            slot = self._slots[0]
            channels = sorted({listener.channel for listener in self._listeners})
            await self._on(slot, lambda: _wake(slot, channels))
        for listener in self._listeners:
            await asyncio.to_thread(listener.join)
        self._listeners = []
        for slot in self._slots:
            await self._on(slot, slot.close)
            slot.executor.shutdown(wait=True)
        self._slots = []
        self._free = None

    async def _on(self, slot: _Slot, fn: Callable[[], T]) -> T:
        ctx = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(slot.executor, lambda: ctx.run(fn))

    async def _with_slot(self, work: Callable[[Any], T]) -> T:
        if self._free is None:
            raise RuntimeError("database is not open")
        slot = await self._free.get()
        try:
            return await self._on(slot, lambda: work(slot.connect()))
        except Exception as exc:
            if _connection_lost(exc):
                # The database is away (down, restarting, a failover): the call
                # fails UNAVAILABLE and wrote nothing; the slot reconnects on
                # its next use, so service resumes by itself when it is back.
                raise Unavailable(
                    f"PostgreSQL at {self.masked_url} is unavailable: {_first_line(exc)}"
                ) from exc
            raise
        finally:
            self._free.put_nowait(slot)

    async def write(self, fn: Callable[[UnitOfWork], T]) -> T:
        """Run ``fn`` on the repositories of a transaction of its own; returns
        once it is committed."""
        return await self.write_sql(lambda conn: fn(PostgresUnitOfWork(conn)))

    async def read(self, fn: Callable[[UnitOfWork], T]) -> T:
        """Run ``fn`` on the repositories, each statement seeing the latest commits."""
        return await self.read_sql(lambda conn: fn(PostgresUnitOfWork(conn)))

    async def read_in_transaction(self, fn: Callable[[UnitOfWork], T]) -> T:
        """Like read, but every statement sees one snapshot."""
        return await self.read_sql_in_transaction(lambda conn: fn(PostgresUnitOfWork(conn)))

    async def write_sql(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in a transaction of its own on the connection itself (the
        store's own upkeep and the operator commands); returns once it is
        committed."""

        def transaction(raw: Any) -> T:
            attempt = 1
            while True:
                try:
                    with raw.transaction():
                        return fn(cast(Connection, PgConnection(raw)))
                except Exception as exc:
                    if attempt >= WRITE_ATTEMPTS or not _retryable(exc):
                        translated = _translate_error(exc)
                        if translated is exc:
                            raise
                        raise translated from exc
                    attempt += 1

        try:
            result = await self._with_slot(transaction)
        except Exception as exc:
            if not _cannot_write(exc):
                raise
            reason = f"{CANNOT_WRITE}: {_first_line(exc.__cause__ or exc)}"
            if self.write_failure is None:
                log.error("%s; health is NOT_SERVING until a write succeeds", reason)
            self.write_failure = reason
            raise Unavailable(f"{reason}; nothing was written; retry with backoff") from exc
        self.write_failure = None
        self.commits += 1
        return result

    async def scrub(self) -> bool:
        """VACUUM every table the service writes (docs/privacy.md): the deleted
        rows' tuples and index entries are removed and their space is free to
        reuse. PostgreSQL does not zero freed space, and its WAL and backups
        keep what they kept: docs/privacy.md says for how long."""

        def vacuum(conn: Connection) -> bool:
            tables = [t.name for t in schema.TABLES]
            tables += [
                str(r[0])
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                )
                if str(r[0]).startswith("vectors_")
            ]
            for table in tables:
                conn.execute(f"VACUUM {table}")
            return True

        return await self.read_sql(vacuum)

    async def read_sql(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` outside a transaction: each statement sees the latest commits."""
        return await self._with_slot(lambda raw: fn(cast(Connection, PgConnection(raw))))

    async def read_sql_in_transaction(self, fn: Callable[[Connection], T]) -> T:
        """Like read_sql, but every statement sees one snapshot (as SQLite's WAL
        read does)."""

        def snapshot(raw: Any) -> T:
            with raw.transaction():
                raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                return fn(cast(Connection, PgConnection(raw)))

        return await self._with_slot(snapshot)

    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        """Call ``callback(payload)`` on the event loop for each NOTIFY on ``channel``,
        from this instance or any other on the database."""
        listener = _Listener(self.url, channel, callback, asyncio.get_running_loop())
        self._listeners.append(listener)
        listener.start()


class _Listener:
    """A LISTEN connection on a thread of its own; reconnects while it runs.

    A notification only wakes the subscriber, which reads what is new from
    its table (ordered by id, resumable): a notification lost while the
    connection was down costs promptness, never an event.  So each reconnect
    also wakes the subscriber once.
    """

    def __init__(
        self,
        url: str,
        channel: str,
        callback: Callable[[str], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", channel):
            raise ValueError(f"bad channel name {channel!r}")
        self.url = url
        self.channel = channel
        self.callback = callback
        self.loop = loop
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pg-listen-{channel}", daemon=True)
        self.connected = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def ask_to_stop(self) -> None:
        self._stopping.set()

    def join(self) -> None:
        self._thread.join(timeout=5)

    def _deliver(self, payload: str) -> None:
        try:
            self.loop.call_soon_threadsafe(self.callback, payload)
        except RuntimeError:  # the loop closed under us: we are shutting down
            self._stopping.set()

    def _run(self) -> None:
        import psycopg

        while not self._stopping.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {self.channel}")
                    self.connected.set()
                    self._deliver("")
                    while not self._stopping.is_set():
                        for note in conn.notifies(timeout=0.5):
                            if self._stopping.is_set():
                                break  # the wake-up of close(), or one that came with it
                            self._deliver(note.payload)
            except psycopg.Error as exc:
                self.connected.clear()
                log.warning("LISTEN %s: %s; reconnecting", self.channel, exc)
                time.sleep(1.0)
