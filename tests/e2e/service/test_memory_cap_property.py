"""The fair cap as a property on PostgreSQL: no interleaving of users' creates
refuses a user who is under their own cap, where the check and the insert
share a transaction that other transactions may run beside.

The property (random sequences of creates, archive and un-archive updates and
deletes, each checked against a plain model of every owner's count) is
tests/memory_cap_check.py's, and its run on the fakes
tests/unit/test_memory_cap_fairness.py's; the count the
rule reads is the same on the fake, SQLite and PostgreSQL by
tests/integration/store/test_repository_contract.py. Here the domain runs on
a real PostgreSQL database, with the property's own sequences.
"""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from hypothesis import given, settings

from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.memories import Memories
from nexus_grpc.store import Database
from nexus_grpc.store import projects as project_store
from tests.memory_cap_check import CAP, SETTINGS, check, ops
from tests.support import HashingEmbedder


class World:
    """The domain's Memories on a PostgreSQL database, with one project."""

    def __init__(self, database_url: str) -> None:
        from nexus_grpc.store.postgres.database import PostgresDatabase

        self.loop = asyncio.new_event_loop()
        self.db = cast(Database, PostgresDatabase(database_url))
        self.loop.run_until_complete(self._open())

    async def _open(self) -> None:
        await self.db.open()
        self.memories = Memories(self.db, JobSignals(), HashingEmbedder(), None, cap=CAP)  # type: ignore[arg-type]
        self.project = (
            await self.db.write_sql(
                lambda c: project_store.ProjectRows(c).insert({"name": "shared"})
            )
        ).id

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.db.close())
        self.loop.close()


@pytest.fixture(scope="module")
def pg_world():
    from tests import pg

    url = pg.new_database()
    w = World(url)
    yield w
    w.close()
    pg.drop_database(url)


@settings(max_examples=150, **SETTINGS)
@given(sequence=ops)
def test_no_interleaving_refuses_a_user_under_their_own_cap_on_postgresql(pg_world, sequence):
    pg_world.run(pg_world.db.write_sql(lambda c: c.execute("DELETE FROM memories")))
    check(pg_world, sequence)
