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
for Qdrant is tests/unit/test_vector_filters_translation.py's.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass
from typing import cast

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import MemoryKind, Project, SearchMode, Session, Tier
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import vector_collections
from nexus_grpc.domain.export import ProjectExport
from nexus_grpc.domain.inline_vectors import InlineVectors
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.memory_visibility import MemoryScope, vector_filter
from nexus_grpc.domain.retrieval.search import MemorySearch
from nexus_grpc.domain.selection import Selector
from nexus_grpc.errors import FailedPrecondition, NotFound
from nexus_grpc.store import Database
from nexus_grpc.store import jobs as job_store
from nexus_grpc.store import projects as project_store
from nexus_grpc.store import sessions as session_store
from nexus_grpc.store.memories import Memory
from nexus_grpc.store.memory_history import Revision
from nexus_grpc.store.postgres.database import PostgresDatabase
from nexus_grpc.store.postgres.vector_index import PgVectorIndex
from nexus_grpc.vectors import VectorIndex
from nexus_grpc.workers.indexer import Indexer
from tests.support import HashingEmbedder

SOAK = os.environ.get("NEXUS_SOAK") == "1"
USERS = ("u1", "u2", "u3")
AGENTS = ("", "a")
TENANTS = ("t1", "t2")
#: A viewer: one tenant's key, or None for an admin key (every tenant).
VIEWERS = (*TENANTS, None)


@dataclass
class Row:
    kind: int
    tier: int
    project_id: int
    user_id: str
    session_id: int
    agent_id: str
    tenant: str


def may_see(scope: MemoryScope, r: Row, viewer: str | None = None, tenants: bool = True) -> bool:
    """The model: written from the rules in the issue, not from memory_scope."""
    if tenants and viewer is not None and r.tenant != viewer:
        return False
    if r.kind == MemoryKind.PROJECT:
        if not scope.project_id or r.project_id != scope.project_id:
            return False
    else:
        if not scope.user_id or r.user_id != scope.user_id:
            return False
        if r.project_id not in (0, scope.project_id):
            return False
    if r.tier in (Tier.TASK, Tier.SESSION) and r.session_id not in (0, scope.session_id):
        return False
    if r.tier == Tier.ARCHIVE and not scope.include_archived:
        return False
    return not (scope.agent_id and r.agent_id != scope.agent_id)


def may_address(r: Row | None, user: str, session: int, viewer: str | None) -> bool:
    """By id: the owner for USER memories, the origin session for session tiers,
    and only within the viewer's tenant."""
    if r is None:
        return False
    if viewer is not None and r.tenant != viewer:
        return False
    if r.kind == MemoryKind.USER and user != r.user_id:
        return False
    return not (r.tier in (Tier.TASK, Tier.SESSION) and r.session_id not in (0, session))


class HostileLLM:
    """Selects (and ranks) every id that appears anywhere, plus invented ones."""

    def __init__(self) -> None:
        self.known: set[int] = set()

    async def input_budget(self, model, fixed, num_predict, **kw):
        return 1_000_000  # every title in one batch: the hostile answer sees them all

    async def chat_json(self, model, messages, schema, **kw):
        ids = sorted(self.known | {10**6})
        text = "\n".join(m["content"] for m in messages)
        seen = {int(x) for x in re.findall(r"\[(\d+)\]", text)}
        ids = sorted(set(ids) | seen)
        if "selected" in schema["properties"]:
            return {"selected": [{"id": i, "relevance": 0.5, "category": "necessary"} for i in ids]}
        return {"ranked": [{"id": i, "relevance": 0.5} for i in ids]}


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
        """Run as a key of ``viewer``'s tenant (None: an admin key) that may act
        for ``users`` (None: every user)."""

        async def as_caller():
            caller = tenancy.Caller(viewer or "t1", users, all_tenants=viewer is None)
            token = tenancy.bind(caller)
            try:
                return await coro
            finally:
                tenancy.reset(token)

        return self.loop.run_until_complete(as_caller())

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


def make_machine(world: World):
    sessions = st.sampled_from([0, *world.sessions])
    tiers = st.sampled_from(list(Tier))
    users = st.sampled_from(USERS)
    viewers = st.sampled_from(VIEWERS)
    tenants = st.sampled_from(TENANTS)

    @st.composite
    def scopes(draw) -> MemoryScope:
        project = draw(st.sampled_from([0, *world.projects]))
        user = draw(st.sampled_from(("", *USERS)))
        if not project and not user:
            user = USERS[0]
        return MemoryScope(
            project, user, draw(sessions), draw(st.sampled_from(AGENTS)), draw(st.booleans())
        )

    class IsolationMachine(RuleBasedStateMachine):
        ids = Bundle("ids")

        @initialize()
        def reset(self) -> None:
            world.run(world.reset())
            self.model: dict[int, Row] = {}
            # Deleted memories as they were at deletion: their history stays
            # readable by the same owner (the retention outlasts any example).
            self.deleted: dict[int, Row] = {}
            # Rows whose expire_at has passed (no expiry job runs here): still in
            # the table, visible to no one and addressable by no one.
            self.expired: set[int] = set()

        @rule(
            target=ids,
            kind=st.sampled_from(list(MemoryKind)),
            tier=tiers,
            project=st.sampled_from([0, *world.projects]),
            user=users,
            session=sessions,
            agent=st.sampled_from(AGENTS),
            word=st.sampled_from(("alpha", "beta", "gamma")),
            tenant=tenants,
        )
        def create(self, kind, tier, project, user, session, agent, word, tenant):
            if kind == MemoryKind.PROJECT:
                project = project or world.projects[0]
                user = ""
            # Another tenant's project or session reads as missing: refused.
            foreign = (project and world.tenant_of_project[project] != tenant) or (
                session and world.tenant_of_session[session] != tenant
            )
            values = {
                "kind": int(kind),
                "title": f"zebra {word}",
                "content": f"{word} note",
                "tier": int(tier),
                "project_id": project,
                "user_id": user,
                "session_id": session,
                "agent_id": agent,
            }
            try:
                mem = world.run(world.memories.create(values), tenant)
            except FailedPrecondition as exc:
                assert foreign, f"refused in its own tenant: {exc}"
                assert "does not exist" in str(exc)
                return multiple()
            assert not foreign, "created in another tenant's project or session"
            self.model[mem.id] = Row(int(kind), int(tier), project, user, session, agent, tenant)
            world.llm.known.add(mem.id)
            return mem.id

        @rule(
            memory_id=ids,
            tier=tiers,
            as_owner=st.booleans(),
            other=users,
            in_origin=st.booleans(),
            other_session=sessions,
            viewer=viewers,
        )
        def update_tier(self, memory_id, tier, as_owner, other, in_origin, other_session, viewer):
            row = self.model.get(memory_id)
            user = row.user_id if row and as_owner else other
            session = row.session_id if row and in_origin else other_session
            allowed = may_address(row, user, session, viewer) and memory_id not in self.expired
            try:
                world.run(
                    world.memories.update(memory_id, {"tier": int(tier)}, ["tier"], user, session),
                    viewer,
                )
            except NotFound:
                assert not allowed, "the owner was refused"
            else:
                assert allowed, "a non-owner changed a USER or session-bound memory"
                row.tier = int(tier)

        @rule(
            memory_id=consumes(ids),
            as_owner=st.booleans(),
            other=users,
            in_origin=st.booleans(),
            other_session=sessions,
            viewer=viewers,
        )
        def delete(self, memory_id, as_owner, other, in_origin, other_session, viewer):
            row = self.model.get(memory_id)
            user = row.user_id if row and as_owner else other
            session = row.session_id if row and in_origin else other_session
            allowed = may_address(row, user, session, viewer) and memory_id not in self.expired
            try:
                world.run(world.memories.delete(memory_id, user, session), viewer)
            except NotFound:
                assert not allowed, "the owner was refused"
            else:
                assert allowed, "a non-owner deleted a USER or session-bound memory"
                self.deleted[memory_id] = self.model.pop(memory_id)

        @rule(user=users, tenant=tenants)
        def delete_all_of_user(self, user, tenant):
            """One tenant's user: the same name in the other tenant is someone else."""
            mine = [
                i
                for i, r in self.model.items()
                if r.user_id == user and r.tenant == tenant and i not in self.expired
            ]
            before = {i: r for i, r in self.model.items() if i not in mine}
            for i in mine:
                world.run(world.memories.delete(i, user, self.model[i].session_id), tenant)
                self.deleted[i] = self.model.pop(i)
            remaining = world.run(
                world.db.read_sql(lambda c: {r[0] for r in c.execute("SELECT id FROM memories")})
            )
            assert remaining == set(before), "deleting one user's memories touched others"

        @rule(
            data=st.data(),
            as_owner=st.booleans(),
            other=users,
            in_origin=st.booleans(),
            other_session=sessions,
            viewer=viewers,
        )
        def history_only_for_its_owner(
            self, data, as_owner, other, in_origin, other_session, viewer
        ):
            known = sorted({*self.model, *self.deleted})
            if not known:
                return
            memory_id = data.draw(st.sampled_from(known))
            row = self.model.get(memory_id) or self.deleted[memory_id]
            user = row.user_id if as_owner else other
            session = row.session_id if in_origin else other_session
            allowed = may_address(row, user, session, viewer)
            try:
                world.run(world.memories.history(memory_id, user, session, 1000, ""), viewer)
            except NotFound:
                assert not allowed, "the owner was refused their memory's history"
            else:
                assert allowed, "a non-owner read a USER or session-bound memory's history"

        @rule(data=st.data())
        def expire(self, data):
            """Time passes for one memory: its expire_at is now behind us."""
            live = sorted(set(self.model) - self.expired)
            if not live:
                return
            memory_id = data.draw(st.sampled_from(live))
            world.run(
                world.db.write_sql(
                    lambda c: c.execute(
                        "UPDATE memories SET expire_at = ? WHERE id = ?",
                        (time.time() - 1, memory_id),
                    )
                )
            )
            self.expired.add(memory_id)

        @rule()
        def index(self):
            world.run(world.drain_index())

        def visible(
            self,
            scope: MemoryScope,
            viewer: str | None = None,
            tenants: bool = True,
            *,
            expired_too: bool = False,
        ) -> set[int]:
            return {
                i
                for i, r in self.model.items()
                if may_see(scope, r, viewer, tenants) and (expired_too or i not in self.expired)
            }

        @rule(scope=scopes(), viewer=viewers)
        def list_is_exactly_the_visible_set(self, scope, viewer):
            page = world.run(world.memories.list_visible(scope, 0, 1000, ""), viewer)
            assert {m.id for m in page.items} == self.visible(scope, viewer)

        @rule(scope=scopes(), mode=st.sampled_from(list(SearchMode)), viewer=viewers)
        def search_returns_only_visible(self, scope, mode, viewer):
            async def go():
                return [h async for h in world.search.search("zebra alpha", scope, 100, mode)]

            got = {h.memory.id for h in world.run(go(), viewer)}
            visible = self.visible(scope, viewer)
            assert got <= visible, f"{mode.name} leaked {got - visible}"
            if mode == SearchMode.KEYWORD:
                assert got == visible

        @rule(
            scope=scopes(),
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

        @rule(scope=scopes())
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

        @rule(
            project=st.sampled_from(world.projects),
            viewer=viewers,
            held=st.one_of(st.none(), st.frozensets(users)),
        )
        def export_holds_only_the_project_and_what_the_key_may_read(self, project, viewer, held):
            async def go():
                return [r async for r in world.export.records(project)]

            foreign = viewer is not None and world.tenant_of_project[project] != viewer
            try:
                records = world.run(go(), viewer, None if viewer is None else held)
            except NotFound:
                assert foreign, "the owner's tenant was refused its project's export"
                return
            assert not foreign, "another tenant exported the project"
            assert isinstance(records[0], Project) and records[0].id == project
            sessions = {r.id for r in records if isinstance(r, Session)}
            assert sessions == {
                sid for sid, pid in world.project_of_session.items() if pid == project
            }
            got = {r.id for r in records if isinstance(r, Memory)}
            may_read = None if viewer is None else held
            expected = {
                i
                for i, r in self.model.items()
                if r.project_id == project
                and i not in self.expired
                and (r.kind != MemoryKind.USER or may_read is None or r.user_id in may_read)
            }
            assert got == expected, f"leaked {got - expected}, missed {expected - got}"
            revisions = {r.memory_id for r in records if isinstance(r, Revision)}
            assert revisions <= got, "history of a memory the export left out"

        @invariant()
        def database_matches_model(self):
            ids = world.run(
                world.db.read_sql(lambda c: {r[0] for r in c.execute("SELECT id FROM memories")})
            )
            assert ids == set(self.model)

    return IsolationMachine


EXAMPLES = 1000 if SOAK else 40


def test_memory_isolation_state_machine(pg_url):
    world = World(pg_url)
    try:
        machine = make_machine(world)
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=50 if SOAK else 25,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
                database=None,
            ),
        )
    finally:
        world.close()


@pytest.mark.slow
def test_memory_isolation_soak(pg_url):
    test_memory_isolation_state_machine(pg_url)
