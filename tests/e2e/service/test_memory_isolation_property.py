"""Isolation as a property: a hypothesis state machine against a model.

Random interleavings of create, update, delete (one at a time and all of one
user's), expiry (a memory's expire_at passing), history reads, indexing,
list, keyword/semantic/hybrid search, selection and project export run against the real
domain objects, a real PostgreSQL database and its pgvector index.
After every read the answer is compared with a plain Python model of who may
see what: nothing outside the viewer's scope is ever returned, and list and
keyword search return exactly the visible set.

Indexing is a rule of its own, so searches also run against a stale index
(points whose rows changed tier or were deleted): the SQLite re-check must
hide them.  Selection runs with a hostile fake model that "selects" every id
it has ever seen, so ids outside the scope must be dropped.

Two tenants share the database, with the same user names in both ("u1" of
one tenant is not "u1" of the other): every call runs as a tenant's key (or
an admin's, who sees both), and a memory of another tenant must be exactly as
invisible and unaddressable as one that does not exist.  Creating a memory in
another tenant's project or session is refused as if it did not exist.

It runs on PostgreSQL (with pgvector in the same database, its scope filters
turned into SQL, and new memories' vectors written in their rows'
transactions), 40 examples by default; ``NEXUS_SOAK=1`` runs far more. The
same machine without the vector paths (list, keyword search, a model's
selection, export, every write) runs on the fakes, whose keyword index and
visibility are the stores' by contract, in
tests/unit/test_isolation_memory_property.py; the vector filter's translation
for Qdrant is tests/unit/test_vector_filters_translation.py's. The rules both
share, and the model, are tests/memory_isolation_machine.py's; this file adds
the real store and the vector paths.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import cast

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test

from nexus_grpc.core.models import SearchMode
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import vector_collections
from nexus_grpc.domain.export import ProjectExport
from nexus_grpc.domain.inline_vectors import InlineVectors
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.memory_visibility import vector_filter
from nexus_grpc.domain.retrieval.search import MemorySearch
from nexus_grpc.domain.selection import Selector
from nexus_grpc.store import Database
from nexus_grpc.store import jobs as job_store
from nexus_grpc.store import projects as project_store
from nexus_grpc.store import sessions as session_store
from nexus_grpc.store.postgres.database import PostgresDatabase
from nexus_grpc.store.postgres.vector_index import PgVectorIndex
from nexus_grpc.vectors import VectorIndex
from nexus_grpc.workers.indexer import Indexer
from tests.memory_isolation_machine import (
    VIEWERS,
    HostileLLM,
    machine_settings,
    make_machine,
    run_as,
    scopes,
)
from tests.support import HashingEmbedder

SOAK = os.environ.get("NEXUS_SOAK") == "1"


class World:
    """One database, index and loop shared by every example (reset between)."""

    def __init__(self, database_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.embedder = HashingEmbedder()
        self.inline: InlineVectors | None = None
        self.db = cast(Database, PostgresDatabase(database_url))
        self.index: VectorIndex = PgVectorIndex(database_url)
        self.inline = InlineVectors(self.embedder)
        self.run(self._open())

    async def _open(self) -> None:
        await self.db.open()
        spec = vector_collections.MEMORIES
        await self.index.ensure_collection(spec.name, self.embedder.dimension, spec.indexed_fields)
        self.memories = Memories(
            self.db, JobSignals(), self.embedder, self.index, inline=self.inline
        )
        self.search = MemorySearch(self.db, self.embedder, self.index)
        self.llm = HostileLLM()
        self.llm_selector = Selector(self.db, self.search, self.llm, "m")  # type: ignore[arg-type]
        self.semantic_selector = Selector(self.db, self.search, None, "m")
        self.indexer = Indexer(self.db, self.embedder, self.index)
        self.export = ProjectExport(self.db)

        def setup(conn):
            # Tenant t1 holds p1, p2 and sessions 1-3 (in p1); t2 holds p3 and session 4.
            projects = [
                project_store.ProjectRows(conn).insert({"name": f"p{i}"}, tenant).id
                for i, tenant in ((1, "t1"), (2, "t1"), (3, "t2"))
            ]
            sessions = [
                session_store.SqlSessions(conn)
                .insert(f"00000000-0000-0000-0000-00000000000{i}", "", project, {}, tenant)
                .id
                for i, project, tenant in (
                    (1, projects[0], "t1"),
                    (2, projects[0], "t1"),
                    (3, projects[0], "t1"),
                    (4, projects[2], "t2"),
                )
            ]
            return projects, sessions

        self.projects, self.sessions = await self.db.write_sql(setup)
        self.tenant_of_project = dict(zip(self.projects, ("t1", "t1", "t2"), strict=True))
        self.tenant_of_session = dict(zip(self.sessions, ("t1", "t1", "t1", "t2"), strict=True))
        self.project_of_session = dict(
            zip(self.sessions, (*[self.projects[0]] * 3, self.projects[2]), strict=True)
        )

    def run(self, coro, viewer: str | None = None, users: frozenset[str] | None = None):
        return run_as(self.loop, coro, viewer, users)

    def reset_example(self) -> None:
        self.run(self.reset())

    def expire(self, memory_id: int) -> None:
        self.run(
            self.db.write_sql(
                lambda c: c.execute(
                    "UPDATE memories SET expire_at = ? WHERE id = ?",
                    (time.time() - 1, memory_id),
                )
            )
        )

    def memory_ids(self) -> set[int]:
        return self.run(
            self.db.read_sql(lambda c: {r[0] for r in c.execute("SELECT id FROM memories")})
        )

    async def reset(self) -> None:
        await self.db.write_sql(lambda c: c.execute("DELETE FROM memories"))
        await self.db.write_sql(lambda c: c.execute("DELETE FROM memory_history"))
        await self.db.write_sql(lambda c: c.execute("DELETE FROM jobs"))
        name = vector_collections.MEMORIES.name
        stale = [i async for page in self.index.ids(name) for i in page]
        if stale:
            await self.index.delete(name, stale)
        self.llm.known.clear()

    async def drain_index(self) -> None:
        kind = vector_collections.MEMORIES.job_kind
        batch = await self.db.write_sql(lambda c: job_store.SqlJobs(c).claim(kind, 10_000))
        if batch:
            await self.indexer.run(vector_collections.MEMORIES, batch)
            await self.db.write_sql(lambda c: job_store.SqlJobs(c).finish([j.id for j in batch]))

    def close(self) -> None:
        if self.inline is not None:
            self.run(self.inline.close())
        self.run(self.db.close())
        self.run(self.index.close())
        self.loop.close()


def pg_machine(world: World):
    """The shared rules, and the paths only a real store and index have."""
    viewers = st.sampled_from(VIEWERS)

    class OnPostgres(make_machine(world)):  # type: ignore[misc]
        @rule()
        def index(self):
            world.run(world.drain_index())

        @rule(scope=scopes(world), mode=st.sampled_from(list(SearchMode)), viewer=viewers)
        def search_returns_only_visible(self, scope, mode, viewer):
            async def go():
                return [h async for h in world.search.search("zebra alpha", scope, 100, mode)]

            got = {h.memory.id for h in world.run(go(), viewer)}
            visible = self.visible(scope, viewer)
            assert got <= visible, f"{mode.name} leaked {got - visible}"
            if mode == SearchMode.KEYWORD:
                assert got == visible

        @rule(
            scope=scopes(world),
            with_model=st.booleans(),
            thread=st.sampled_from(("t1", "t2")),
            viewer=viewers,
        )
        def select_returns_only_visible(self, scope, with_model, thread, viewer):
            selector = world.llm_selector if with_model else world.semantic_selector

            async def go():
                return [s async for s in selector.select("zebra?", scope, thread, "", 100)]

            got = {s.memory.id for s in world.run(go(), viewer)}
            visible = self.visible(scope, viewer)
            assert got <= visible, f"selection leaked {got - visible}"
            if with_model:
                assert got == visible  # the hostile model picks everything it may

        @rule(scope=scopes(world))
        def vector_filter_alone_is_sound(self, scope):
            """With a fresh index, the payload filter by itself hides what it must
            (the SQLite re-check is a second line, not the only one). Vector
            payloads carry no tenant: that line is the SQLite re-check's alone,
            which the search and selection rules above prove."""

            async def go():
                await world.drain_index()
                [vec] = await world.embedder.embed(["zebra alpha"])
                flt = vector_filter(scope)
                return await world.index.search(
                    vector_collections.MEMORIES.name, vec, filter=flt, limit=1000
                )

            got = {h.id for h in world.run(go())}
            # Tenant and time are the SQLite re-check's to apply; scope is the filter's own.
            visible = self.visible(scope, tenants=False, expired_too=True)
            assert got <= visible, f"vector filter leaked {got - visible}"

    return OnPostgres


EXAMPLES = 1000 if SOAK else 40


def test_memory_isolation_state_machine(pg_url):
    world = World(pg_url)
    try:
        run_state_machine_as_test(
            pg_machine(world), settings=machine_settings(EXAMPLES, 50 if SOAK else 25)
        )
    finally:
        world.close()


@pytest.mark.slow
def test_memory_isolation_soak(pg_url):
    test_memory_isolation_state_machine(pg_url)
