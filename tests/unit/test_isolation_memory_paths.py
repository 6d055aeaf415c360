"""Which memories a scope sees, for every kind and tier, on ListMemories' and
SearchMemories' keyword path (domain/memories.py's ``list_visible`` and
domain/retrieval/search.py's MemorySearch), on the fakes of tests/fakes.py,
whose keyword index matches as both stores do
(tests/integration/store/test_repository_contract_keyword.py): both return
exactly the memories the visibility rule lets the scope see.

The same scopes on the semantic and hybrid paths (the vector index's filter
and the re-check of its hits) are tests/e2e/service/test_memories.py's; the
memories and scopes both use are tests/scoped_memories.py's.
"""

from __future__ import annotations

import pytest

from nexus_grpc.core.models import MemoryScope, SearchMode
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.retrieval.search import MemorySearch
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.scoped_memories import memory_specs, scope_cases


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


async def world(uow: FakeUnitOfWork) -> tuple[int, int, int, int]:
    """Projects p1 and p2, sessions s1 and s2 of p1, and a memory of every
    kind and tier named by its title, each holding the word "zebra"."""
    db = FakeDatabase(uow)
    conv = Conversations(db, JobSignals())
    p1 = (await conv.create_project({"name": "p1"})).id
    p2 = (await conv.create_project({"name": "p2"})).id
    s1 = (await conv.create_session("", "", p1, {})).id
    s2 = (await conv.create_session("", "", p1, {})).id
    specs = memory_specs(p1, p2, s1, s2)
    memories = Memories(db, JobSignals(), None, None)  # type: ignore[arg-type]
    for title, fields in specs.items():
        await memories.create({"title": title, "content": f"zebra content for {title}", **fields})
    return p1, p2, s1, s2


async def seen(uow: FakeUnitOfWork, scope: MemoryScope) -> dict[str, set[str]]:
    db = FakeDatabase(uow)
    listed = await Memories(db, JobSignals(), None, None).list_visible(scope, 0, 1000, "")  # type: ignore[arg-type]
    # Keyword mode reads no embedder and no vector index.
    search = MemorySearch(db, None, None)  # type: ignore[arg-type]
    hits = [h async for h in search.search("zebra", scope, 100, SearchMode.KEYWORD)]
    return {"list": {m.title for m in listed.items}, "keyword": {h.memory.title for h in hits}}


async def test_list_and_keyword_search_see_exactly_what_the_scope_may_for_every_kind_and_tier(
    uow,
):
    p1, p2, s1, s2 = await world(uow)
    cases = scope_cases(MemoryScope, p1, p2, s1, s2)
    for scope, expected in cases:
        found = await seen(uow, scope)
        for path, titles in found.items():
            assert titles == expected, (path, scope)
