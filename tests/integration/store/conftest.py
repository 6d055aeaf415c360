"""The store tests' shared fixture: ``run``, one transaction of the fake, SQLite
or PostgreSQL unit of work, for the repositories' contract files
(test_repository_contract*.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from nexus_grpc.store.postgres.database import PostgresDatabase
from nexus_grpc.store.sqlite.database import Database
from tests.fakes import FakeUnitOfWork

Case = Callable[[Any], Any]


@pytest.fixture(params=["fake", "sqlite", "postgresql"])
async def run(request, tmp_path):
    """Runs a case in one transaction of the backend, returning what it returns."""
    if request.param == "fake":
        uow = FakeUnitOfWork()

        async def on_fake(case: Case) -> Any:
            return case(uow)

        on_fake.backend = "fake"  # type: ignore[attr-defined]
        yield on_fake
        return
    if request.param == "sqlite":
        db: Any = Database(tmp_path / "contract.db")
    else:
        db = PostgresDatabase(request.getfixturevalue("pg_url"))
    await db.open()

    async def on_store(case: Case) -> Any:
        return await db.write(case)

    # What a case may ask: PostgreSQL leases its running jobs, the others do not.
    on_store.backend = request.param  # type: ignore[attr-defined]
    try:
        yield on_store
    finally:
        await db.close()
