"""Which memories a scope sees, for every kind and tier, on ListMemories' and
SearchMemories' keyword path (domain/memories.py's ``list_visible`` and
domain/retrieval/search.py's MemorySearch), on the fakes of tests/fakes.py,
whose keyword index matches as both stores do
(tests/integration/store/test_repository_contract_keyword.py): both return
exactly the memories the visibility rule lets the scope see.

The same scopes on the semantic and hybrid paths (the vector index's filter
and the re-check of its hits) are tests/e2e/service/test_memories.py's.
"""

from __future__ import annotations

import pytest

from nexus_grpc.core.models import MemoryKind, MemoryScope, SearchMode, Tier
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.retrieval.search import MemorySearch
from tests.fakes import FakeDatabase, FakeUnitOfWork

P, U = int(MemoryKind.PROJECT), int(MemoryKind.USER)
TASK, SESSION, LONGTERM, ARCHIVE = (int(t) for t in Tier)


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
    specs = {
        "p1-task-s1": dict(kind=P, project_id=p1, tier=TASK, session_id=s1),
        "p1-session-s1": dict(kind=P, project_id=p1, tier=SESSION, session_id=s1),
        "p1-task-nosession": dict(kind=P, project_id=p1, tier=TASK),
        "p1-longterm": dict(kind=P, project_id=p1, tier=LONGTERM, session_id=s1),
        "p1-archive": dict(kind=P, project_id=p1, tier=ARCHIVE),
        "p2-longterm": dict(kind=P, project_id=p2, tier=LONGTERM),
        "alice-longterm": dict(kind=U, user_id="alice", tier=LONGTERM),
        "alice-p1-longterm": dict(kind=U, user_id="alice", project_id=p1, tier=LONGTERM),
        "alice-p2-longterm": dict(kind=U, user_id="alice", project_id=p2, tier=LONGTERM),
        "alice-session-s2": dict(
            kind=U, user_id="alice", project_id=p1, tier=SESSION, session_id=s2
        ),
        "bob-longterm": dict(kind=U, user_id="bob", tier=LONGTERM),
        "bob-p1-task-s1": dict(kind=U, user_id="bob", project_id=p1, tier=TASK, session_id=s1),
        "p1-agent-x": dict(kind=P, project_id=p1, tier=LONGTERM, agent_id="x"),
    }
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
    cases = [
        (
            MemoryScope(project_id=p1, user_id="alice", session_id=s1),
            {"p1-task-s1", "p1-session-s1", "p1-task-nosession", "p1-longterm",
             "alice-longterm", "alice-p1-longterm", "p1-agent-x"},
        ),
        (
            MemoryScope(project_id=p1, user_id="alice", session_id=s2),
            {"p1-task-nosession", "p1-longterm", "alice-longterm", "alice-p1-longterm",
             "alice-session-s2", "p1-agent-x"},
        ),
        (
            MemoryScope(project_id=p1, user_id="bob", session_id=s1, include_archived=True),
            {"p1-task-s1", "p1-session-s1", "p1-task-nosession", "p1-longterm", "p1-archive",
             "bob-longterm", "bob-p1-task-s1", "p1-agent-x"},
        ),
        (MemoryScope(user_id="alice"), {"alice-longterm"}),
        (MemoryScope(project_id=p2), {"p2-longterm"}),
        (
            MemoryScope(project_id=p2, user_id="alice"),
            {"p2-longterm", "alice-longterm", "alice-p2-longterm"},
        ),
        (MemoryScope(project_id=p1, agent_id="x"), {"p1-agent-x"}),
        (MemoryScope(user_id="carol", project_id=p2), {"p2-longterm"}),
    ]  # fmt: skip
    for scope, expected in cases:
        found = await seen(uow, scope)
        for path, titles in found.items():
            assert titles == expected, (path, scope)
