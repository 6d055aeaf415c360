"""Fixtures shared by every test module."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from nexus_grpc.store.sqlite.connection import connect as sqlite_connect
from nexus_grpc.store.sqlite.migrations import migrate
from tests.graph_support import start_graph_harness
from tests.ollama_stub import OllamaStub, Reply
from tests.support import Harness, start_harness


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets ``BOTH_STORES = True`` runs each of its harness tests
    twice: on SQLite and on PostgreSQL (the embedded server of tests/pg.py)."""
    if "store_kind" in metafunc.fixturenames and getattr(metafunc.module, "BOTH_STORES", False):
        metafunc.parametrize("store_kind", ["sqlite", "postgresql"])


@pytest.fixture
def store_kind() -> str:
    """The system of record a harness runs on; SQLite unless the module asks for both."""
    return "sqlite"


@pytest.fixture
def store_settings(store_kind: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """The harness settings that put it on ``store_kind``: a fresh PostgreSQL
    database's URL, or nothing (SQLite in the data directory)."""
    if store_kind == "postgresql":
        return {"database_url": request.getfixturevalue("pg_url")}
    return {}


@pytest.fixture
async def harness(tmp_path, store_settings: dict[str, str]) -> Harness:
    h = await start_harness(tmp_path / "data", **store_settings)
    yield h
    await h.close()


@pytest.fixture
async def llm_harness(
    tmp_path, stub: OllamaStub, store_settings: dict[str, str]
) -> AsyncIterator[Harness]:
    """A harness whose LLM is the Ollama stand-in (summaries, selection), on the
    module's store (both, where the module sets BOTH_STORES)."""
    h = await start_harness(tmp_path / "data", ollama_url=stub.url, **store_settings)
    yield h
    await h.close()


@pytest.fixture
async def gh(tmp_path, stub: OllamaStub, store_settings: dict[str, str]) -> AsyncIterator[Harness]:
    """A harness with the graph's extraction running against the Ollama stand-in,
    on the module's store."""
    h = await start_graph_harness(tmp_path / "data", stub, **store_settings)
    yield h
    await h.close()


@pytest.fixture
def disk_path() -> Iterator[Path]:
    """A directory on a disk file system, for the few tests whose rule is the
    disk's: ``make test`` puts ``tmp_path`` on a tmpfs (docs/testing.md), where
    an fsync costs nothing (so commits need no grouping) and a page read
    through a memory map is allocated (so a sparse file's holes fill).
    /var/tmp is on disk (FHS)."""
    path = Path(tempfile.mkdtemp(prefix="nexus-disk-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    """A fresh SQLite database in memory, built by the store's own migrations:
    what the domain and store functions are called with, without a server.

    Autocommit (the store issues BEGIN/COMMIT itself), rows by name and
    foreign keys enforced, as the store's own connections are (store/sqlite/database.py).
    """
    c = sqlite_connect(":memory:", isolation_level=None)
    c.row_factory = sqlite3.Row
    c.execute("PRAGMA foreign_keys = ON")
    migrate(c)
    yield c
    c.close()


@pytest.fixture
def two_sessions(conn: sqlite3.Connection) -> None:
    """Sessions 1 and 2 (no project) in ``conn``, for tests of what one
    session's rows may or may not reach of another's."""
    for sid in (1, 2):
        conn.execute(
            "INSERT INTO sessions (id, external_id, created_at) VALUES (?, ?, 0)", (sid, f"s{sid}")
        )


@pytest.fixture
def stub(request: pytest.FixtureRequest) -> Iterator[OllamaStub]:
    """The protocol-faithful Ollama stand-in, on an ephemeral port.

    A module whose tests need an answer to chats they did not script sets
    ``STUB_DEFAULT_REPLY``: the JSON object the stub then answers with.
    """
    default = getattr(request.module, "STUB_DEFAULT_REPLY", None)
    with OllamaStub(default=None if default is None else Reply.of(default)) as s:
        yield s


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh database on the session's embedded PostgreSQL (tests/pg.py)."""
    from tests import pg

    url = pg.new_database()
    yield url
    pg.drop_database(url)


@pytest.fixture
def pg_empty_url() -> Iterator[str]:
    """An empty database (no schema yet) on the session's embedded PostgreSQL."""
    from tests import pg

    url = pg.new_database(migrated=False)
    yield url
    pg.drop_database(url)


@pytest.fixture(scope="session", autouse=True)
def _stop_embedded_postgres() -> Iterator[None]:
    yield
    from tests import pg

    pg.stop()
