"""The store's seam: what the domain and the workers hold of a database.

Two stores implement it: SQLite (``store.sqlite.database.Database`` over ``sqlite3``) and
PostgreSQL (``store.postgres.database.PostgresDatabase`` over psycopg). The domain
decides inside a unit of work, a synchronous function given the
transaction's repositories (``core.repositories.UnitOfWork``); the store runs
it in a transaction on its own thread and commits it (``Database.write``) or
only reads (``Database.read``). The functions that run statements on a
``Connection`` all live in ``store/``, behind those repositories: the domain
never holds a connection and never writes SQL.

The seam is structural (``typing.Protocol``): a store need not inherit
from anything, and ``sqlite3.Connection`` is a ``Connection`` as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from nexus_grpc.errors import DependencyError

if TYPE_CHECKING:
    from nexus_grpc.core.repositories import UnitOfWork

T = TypeVar("T")


class Cursor(Protocol):
    """The answer to one statement: its rows, or what it changed."""

    @property
    def rowcount(self) -> int: ...

    @property
    def lastrowid(self) -> int | None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """One connection inside one unit of work. Rows read by name or index."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Cursor: ...

    @property
    def in_transaction(self) -> bool: ...


class Database(Protocol):
    """The unit of work. ``write`` runs ``fn`` in one transaction and commits
    it before returning (a write that returned survives ``kill -9``); if
    ``fn`` raises, nothing it did stays. ``read`` runs ``fn`` where each
    statement sees the latest commits; ``read_in_transaction`` gives ``fn``
    one snapshot for all its statements. ``fn`` is handed the transaction's
    repositories (``core.repositories.UnitOfWork``), never a connection."""

    #: The schema version ``open`` migrated to.
    schema_version: int
    #: Transactions committed since ``open`` (group commit shares one).
    commits: int
    #: Why the last write failed for the storage's sake (a full disk, a
    #: read-only file, an I/O error), until a write succeeds again; None while
    #: writes succeed. Health reads it, and probes with a write while it is set.
    write_failure: str | None

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def write(self, fn: Callable[[UnitOfWork], T]) -> T: ...

    async def scrub(self) -> bool:
        """Make the bytes of deleted rows leave the database's files as far as
        the engine allows (SQLite: all of them; PostgreSQL: docs/privacy.md).
        False: not all of it yet (a reader held the WAL); try again."""
        ...

    async def read(self, fn: Callable[[UnitOfWork], T]) -> T: ...

    async def read_in_transaction(self, fn: Callable[[UnitOfWork], T]) -> T: ...


# The store's error contract: what either database raises through the seam,
# whatever its driver's own classes (no sqlite3 or psycopg exception crosses
# it). A lookup that finds nothing raises ``errors.NotFound``, naming the
# resource; a write the database cannot take at all (a full disk, a read-only
# server) is ``errors.Unavailable`` saying the store cannot write.


class StoreError(DependencyError):
    """The database refused or failed a statement: the message says why."""


class Conflict(StoreError):
    """A write broke a rule of the schema: a unique key taken, a foreign key
    missing, a check (two graphs in one relationship) failed."""

    retryable = False


class StoreUnavailable(StoreError, RuntimeError):
    """The database cannot be opened or reached: the message says which and why."""

    unreachable = True


#: The start of the UNAVAILABLE message a write answers while the store
#: cannot write: clients and operators read it, tests look for it.
CANNOT_WRITE = "the store cannot write"
