"""SearchEntities' and SearchMemories' scopes (domain/retrieval/entity_kind.py,
memory_kind.py) on the fakes: an entity search names exactly one graph, a
project of the caller's tenant or a session outside any project; its hits
stay in that graph. A memory search drops the scope's common words, learnt
per tenant (one tenant's words do not shape another's search), and its
last-word filter holds each row to the visibility rule, the tenant and the
expiry the paths judged.

Real searches over the index are the whole-server tier's
(tests/e2e/service/test_graph.py, test_search_scope.py, and
tests/e2e/service/test_memories.py for memories).
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from nexus_grpc.core.models import MemoryKind, MemoryScope, SearchMode, Tier
from nexus_grpc.domain.retrieval.call import Call
from nexus_grpc.domain.retrieval.common_terms import ScopeVocabulary
from nexus_grpc.domain.retrieval.entity_kind import Entities, GraphRequest, in_graph
from nexus_grpc.domain.retrieval.memory_kind import Memories, visible_now
from nexus_grpc.errors import FailedPrecondition, InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.callers import acting_as


def _engine(uow: FakeUnitOfWork) -> SimpleNamespace:
    return SimpleNamespace(db=FakeDatabase(uow), vocabulary=ScopeVocabulary())


async def _open_entities(uow: FakeUnitOfWork, project_id: int = 0, session_id: int = 0) -> Call:
    call = Call("Ada", 10, SearchMode.HYBRID, GraphRequest(project_id, session_id))
    assert await Entities().open(_engine(uow), call)  # type: ignore[arg-type]
    return call


@pytest.mark.parametrize(("project_id", "session_id"), [(0, 0), (1, 2)])
async def test_an_entity_search_names_exactly_one_graph(project_id, session_id):
    with pytest.raises(InvalidArgument, match="needs exactly one graph") as err:
        await _open_entities(FakeUnitOfWork(), project_id, session_id)
    assert f"got project_id {project_id}, session_id {session_id}" in err.value.message


async def test_an_entity_search_opens_on_a_project_or_a_lone_sessions_graph():
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, "t1").id
    lone = uow.sessions.insert("s", "", 0, {}, "t1").id
    assert (await _open_entities(uow, project_id=project)).scope == (project, 0)
    assert (await _open_entities(uow, session_id=lone)).scope == (0, lone)


async def test_another_tenants_project_or_a_session_in_a_project_is_refused():
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, "t1").id
    member = uow.sessions.insert("s", "", project, {}, "t1").id
    with acting_as("t2"), pytest.raises(NotFound, match=f"project {project} does not exist"):
        await _open_entities(uow, project_id=project)
    with pytest.raises(FailedPrecondition, match=f"use project_id {project}"):
        await _open_entities(uow, session_id=member)


async def test_an_entity_hit_stays_in_the_searched_graph():
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, "t1").id
    here = uow.graph.insert_entity((project, 0), "Ada", "person", "a mathematician", source="t")
    row = uow.graph.get_entity(here)
    call = await _open_entities(uow, project_id=project)
    assert in_graph(row, call)
    assert not in_graph(replace(row, project_id=0, session_id=9), call)
    assert Entities().document(row) == "Ada (person): a mathematician"


def _memory(uow: FakeUnitOfWork, content: str, tenant: str = "t1", **extra) -> int:
    values = {
        "kind": int(MemoryKind.USER), "title": "note", "content": content,
        "tier": int(Tier.LONGTERM), "project_id": 0, "agent_id": "", "user_id": "ann",
        "session_id": 0, "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    return uow.memories.insert({**values, **extra}, None, tenant).id


async def test_a_memory_searchs_common_words_are_learnt_per_tenant():
    uow = FakeUnitOfWork()
    for i in range(40):
        _memory(uow, f"ann likes tea {i}", "t1")
    _memory(uow, "ann likes tea", "t2")
    engine = _engine(uow)
    scope = MemoryScope(user_id="ann")
    with acting_as("t1"):
        call = Call("does ann like sencha", 10, SearchMode.HYBRID, scope)
        await Memories().open(engine, call)  # type: ignore[arg-type]
    assert {"ann", "tea"} <= call.scope.common and call.scope.tenant == "t1"
    assert "ann" not in call.scope.match
    assert call.scope.semantic_text("does ann like sencha") == "does like sencha"
    with acting_as("t2"):  # the same scope in another tenant: its own sample
        theirs = Call("does ann like sencha", 10, SearchMode.HYBRID, scope)
        await Memories().open(engine, theirs)  # type: ignore[arg-type]
    assert theirs.scope.common == frozenset() and "ann" in theirs.scope.match


async def test_an_empty_memory_scope_is_refused_before_anything_is_read():
    call = Call("tea", 10, SearchMode.HYBRID, MemoryScope())
    with pytest.raises(InvalidArgument, match="an empty scope sees nothing"):
        await Memories().open(SimpleNamespace(db=None, vocabulary=None), call)  # type: ignore[arg-type]


async def test_a_memory_row_is_held_to_the_rule_the_tenant_and_the_expiry_judged():
    uow = FakeUnitOfWork()
    with acting_as("t1"):
        call = Call("tea", 10, SearchMode.HYBRID, MemoryScope(user_id="ann"))
        await Memories().open(_engine(uow), call)  # type: ignore[arg-type]
    now = call.scope.now
    row = uow.memories.get(_memory(uow, "tea"))
    assert visible_now(row, call)
    assert not visible_now(replace(row, tenant="t2"), call)
    assert not visible_now(replace(row, user_id="bob"), call)
    assert not visible_now(replace(row, expire_at=now), call)  # expired as the search began
    assert visible_now(replace(row, expire_at=now + 1), call)
