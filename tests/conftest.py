"""Fixtures shared by every test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ollama_stub import OllamaStub, Reply
from tests.support import Harness, start_harness


@pytest.fixture
async def harness(tmp_path) -> Harness:
    h = await start_harness(tmp_path / "data")
    yield h
    await h.close()


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
