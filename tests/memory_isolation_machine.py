"""The isolation property's state machine, shared by its two runs: on the fakes
(tests/unit/test_isolation_memory_property.py) and on PostgreSQL with pgvector
(tests/e2e/service/test_memory_isolation_property.py).

Here are the model of who may see and address what (``Row``, ``may_see``,
``may_address``), the hostile selection model, and the rules both runs share:
create, update, delete (one and all of one user's), expiry, history, list and
project export, with the invariant that the stored ids are the model's. Each
run subclasses ``make_machine(world)`` with the paths only it can check, and
its world supplies the store: ``reset_example()``, ``expire(memory_id)`` and
``memory_ids()``, besides ``run``, ``memories``, ``export``, ``llm`` and the
projects and sessions with their tenants.

It imports no store: the unit tier imports it.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

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
)

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import MemoryKind, MemoryScope, Project, Session, Tier
from nexus_grpc.core.records import Memory, Revision
from nexus_grpc.errors import FailedPrecondition, NotFound

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
        text = "\n".join(m["content"] for m in messages)
        seen = {int(x) for x in re.findall(r"\[(\d+)\]", text)}
        ids = sorted(self.known | {10**6} | seen)
        if "selected" in schema["properties"]:
            return {"selected": [{"id": i, "relevance": 0.5, "category": "necessary"} for i in ids]}
        return {"ranked": [{"id": i, "relevance": 0.5} for i in ids]}


def run_as(loop: asyncio.AbstractEventLoop, coro, viewer: str | None, users: frozenset[str] | None):
    """Run ``coro`` on ``loop`` as a key of ``viewer``'s tenant (None: an admin
    key) that may act for ``users`` (None: every user)."""

    async def as_caller():
        token = tenancy.bind(tenancy.Caller(viewer or "t1", users, all_tenants=viewer is None))
        try:
            return await coro
        finally:
            tenancy.reset(token)

    return loop.run_until_complete(as_caller())


def machine_settings(max_examples: int, stateful_step_count: int) -> settings:
    return settings(
        max_examples=max_examples,
        stateful_step_count=stateful_step_count,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        database=None,
    )


def make_machine(world):
    """The rules both runs share, bound to ``world``; subclass it for the rest."""
    sessions = st.sampled_from([0, *world.sessions])
    tiers = st.sampled_from(list(Tier))
    users = st.sampled_from(USERS)
    viewers = st.sampled_from(VIEWERS)
    tenants = st.sampled_from(TENANTS)

    class IsolationMachine(RuleBasedStateMachine):
        ids = Bundle("ids")

        @initialize()
        def reset(self) -> None:
            world.reset_example()
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
                "kind": int(kind), "title": f"zebra {word}", "content": f"{word} note",
                "tier": int(tier), "project_id": project, "user_id": user,
                "session_id": session, "agent_id": agent,
            }  # fmt: skip
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

        def _who(self, memory_id, as_owner, other, in_origin, other_session):
            row = self.model.get(memory_id)
            user = row.user_id if row and as_owner else other
            session = row.session_id if row and in_origin else other_session
            return row, user, session

        @rule(
            memory_id=ids, tier=tiers, as_owner=st.booleans(), other=users,
            in_origin=st.booleans(), other_session=sessions, viewer=viewers,
        )  # fmt: skip
        def update_tier(self, memory_id, tier, as_owner, other, in_origin, other_session, viewer):
            row, user, session = self._who(memory_id, as_owner, other, in_origin, other_session)
            allowed = may_address(row, user, session, viewer) and memory_id not in self.expired
            update = world.memories.update(memory_id, {"tier": int(tier)}, ["tier"], user, session)
            try:
                world.run(update, viewer)
            except NotFound:
                assert not allowed, "the owner was refused"
            else:
                assert allowed, "a non-owner changed a USER or session-bound memory"
                row.tier = int(tier)

        @rule(
            memory_id=consumes(ids), as_owner=st.booleans(), other=users,
            in_origin=st.booleans(), other_session=sessions, viewer=viewers,
        )  # fmt: skip
        def delete(self, memory_id, as_owner, other, in_origin, other_session, viewer):
            row, user, session = self._who(memory_id, as_owner, other, in_origin, other_session)
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
            before = {i for i in self.model if i not in mine}
            for i in mine:
                world.run(world.memories.delete(i, user, self.model[i].session_id), tenant)
                self.deleted[i] = self.model.pop(i)
            assert world.memory_ids() == before, "deleting one user's memories touched others"

        @rule(
            data=st.data(), as_owner=st.booleans(), other=users, in_origin=st.booleans(),
            other_session=sessions, viewer=viewers,
        )  # fmt: skip
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
            world.expire(memory_id)
            self.expired.add(memory_id)

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

        @rule(scope=scopes(world), viewer=viewers)
        def list_is_exactly_the_visible_set(self, scope, viewer):
            page = world.run(world.memories.list_visible(scope, 0, 1000, ""), viewer)
            assert {m.id for m in page.items} == self.visible(scope, viewer)

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
            assert sessions == {s for s, p in world.project_of_session.items() if p == project}
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
        def stored_ids_match_the_model(self):
            assert world.memory_ids() == set(self.model)

    return IsolationMachine


def scopes(world) -> st.SearchStrategy[MemoryScope]:
    """A viewer's scope over ``world``'s projects and sessions (never both empty)."""

    @st.composite
    def draw_scope(draw) -> MemoryScope:
        project = draw(st.sampled_from([0, *world.projects]))
        user = draw(st.sampled_from(("", *USERS)))
        if not project and not user:
            user = USERS[0]
        session = draw(st.sampled_from([0, *world.sessions]))
        return MemoryScope(
            project, user, session, draw(st.sampled_from(AGENTS)), draw(st.booleans())
        )

    return draw_scope()
