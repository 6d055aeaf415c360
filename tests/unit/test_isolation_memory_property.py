"""Isolation as a property, on the fakes of tests/fakes.py: a hypothesis state
machine against a plain Python model of who may see what.

Random interleavings of create, update, delete (one at a time and all of one
user's), expiry (a memory's expire_at passing), history reads, list, keyword
search, selection by a hostile model and project export run against the real
domain objects on the fakes. After every read the answer is compared with the
model: nothing outside the viewer's scope is ever returned, and list, keyword
search and the hostile selection return exactly the visible set. Two tenants
share the rows, with the same user names in both; every call runs as a
tenant's key (or an admin's, who sees both), and a memory of another tenant
must be exactly as invisible and unaddressable as one that does not exist.

The fakes' keyword index and visibility are the stores' by contract
(tests/integration/store/test_repository_contract_keyword.py and
test_repository_contract.py). The same machine with the semantic and hybrid
paths, a stale vector index and the vector filter alone, on PostgreSQL with
pgvector, is tests/e2e/service/test_memory_isolation_property.py. The rules
both share, and the model, are tests/memory_isolation_machine.py's; this
file adds the fakes and the paths the fakes can check.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test

from nexus_grpc.core.models import SearchMode
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.export import ProjectExport
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.retrieval.search import MemorySearch
from nexus_grpc.domain.selection import Selector
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.memory_isolation_machine import (
    VIEWERS,
    HostileLLM,
    machine_settings,
    make_machine,
    run_as,
    scopes,
)


class World:
    """Fresh fakes for each example: tenant t1 holds projects 1 and 2 and
    sessions 1-3 (in project 1); t2 holds project 3 and session 4."""

    projects = (1, 2, 3)
    sessions = (1, 2, 3, 4)
    tenant_of_project = {1: "t1", 2: "t1", 3: "t2"}
    tenant_of_session = {1: "t1", 2: "t1", 3: "t1", 4: "t2"}
    project_of_session = {1: 1, 2: 1, 3: 1, 4: 3}

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def reset_example(self) -> None:
        self.uow = FakeUnitOfWork()
        for p in self.projects:
            assert self.uow.projects.insert({"name": f"p{p}"}, self.tenant_of_project[p]).id == p
        for s in self.sessions:
            made = self.uow.sessions.insert(
                f"00000000-0000-0000-0000-00000000000{s}", "", self.project_of_session[s], {},
                self.tenant_of_session[s],
            )  # fmt: skip
            assert made.id == s
        db = FakeDatabase(self.uow)
        self.memories = Memories(db, JobSignals(), None, None)  # type: ignore[arg-type]
        # Keyword mode and a model's selection read no embedder and no vector index.
        self.search = MemorySearch(db, None, None)  # type: ignore[arg-type]
        self.llm = HostileLLM()
        self.selector = Selector(db, self.search, self.llm, "m")  # type: ignore[arg-type]
        self.export = ProjectExport(db)

    def expire(self, memory_id: int) -> None:
        rows = self.uow.memories.rows
        rows[memory_id] = replace(rows[memory_id], expire_at=rows[memory_id].created_at - 1)

    def memory_ids(self) -> set[int]:
        return set(self.uow.memories.rows)

    def run(self, coro, viewer: str | None = None, users: frozenset[str] | None = None):
        return run_as(self.loop, coro, viewer, users)


def fakes_machine(world: World):
    """The shared rules, and the two read paths the fakes check exactly."""
    viewers = st.sampled_from(VIEWERS)

    class OnTheFakes(make_machine(world)):  # type: ignore[misc]
        @rule(scope=scopes(world), viewer=viewers)
        def keyword_search_is_exactly_the_visible_set(self, scope, viewer):
            async def go():
                search = world.search.search("zebra alpha", scope, 100, SearchMode.KEYWORD)
                return [h async for h in search]

            got = {h.memory.id for h in world.run(go(), viewer)}
            assert got == self.visible(scope, viewer), "keyword search leaked or missed"

        @rule(scope=scopes(world), thread=st.sampled_from(("t1", "t2")), viewer=viewers)
        def a_hostile_selection_is_exactly_the_visible_set(self, scope, thread, viewer):
            async def go():
                return [s async for s in world.selector.select("zebra?", scope, thread, "", 100)]

            got = {s.memory.id for s in world.run(go(), viewer)}
            # The hostile model picks everything, and everything it may not is dropped.
            assert got == self.visible(scope, viewer), "selection leaked or missed"

    return OnTheFakes


def test_memory_isolation_state_machine():
    world = World()
    try:
        run_state_machine_as_test(fakes_machine(world), settings=machine_settings(100, 25))
    finally:
        world.loop.close()
