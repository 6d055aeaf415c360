"""Why an empty answer is empty (domain/empty_answers.py), decided on the fakes
of tests/fakes.py from a project's exchanges and the jobs they wait for: no
LLM so nothing formed yet, formation off for the project, jobs still pending
with an LLM, nothing stored told apart from nothing matched, the selection
model's own words, and another tenant's project heard as one that does not
exist.

What a client sees of them (the x-nexus-empty-reason and
x-nexus-selection-method trailers of each RPC, a selection the model made
empty) is tests/e2e/service/test_empty_answers.py's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import MemoryFormation, MemoryKind, MemoryScope, SearchMode
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import empty_answers
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.empty_answers import EmptyAnswers
from nexus_grpc.domain.memories import Memories
from tests.fakes import FakeDatabase, FakeUnitOfWork


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def conv(uow: FakeUnitOfWork) -> Conversations:
    return Conversations(FakeDatabase(uow), JobSignals())


def reasons(uow: FakeUnitOfWork, *, llm: bool = False) -> EmptyAnswers:
    return EmptyAnswers(FakeDatabase(uow), llm_configured=llm)


async def world(
    conv: Conversations,
    user_id: str = "alice",
    formation: MemoryFormation | None = None,
    name: str = "p",
) -> tuple[int, int]:
    """A project (formation: its setting; unset, the default, USER) and a session
    of ``user_id`` in it with one exchange, written as CreateEpisode writes it."""
    values = {"name": name} if formation is None else {"name": name, "memory_formation": formation}
    project = await conv.create_project(values)
    session = await conv.create_session("", "", project.id, {}, user_id=user_id)
    await conv.create_episode(session.id, "I'm vegetarian now.", "Noted.", {}, "")
    return project.id, session.id


async def test_without_an_llm_what_waits_for_a_model_says_nothing_formed_yet(uow, conv):
    pid, sid = await world(conv)
    why = reasons(uow)
    scope = MemoryScope(project_id=pid, user_id="alice", session_id=sid)
    listed = str(await why.listed(scope, 0))
    assert listed.startswith("LLM_OFF: no LLM server is configured"), listed
    assert listed.endswith("1 exchange waits for memory formation"), listed
    # SearchMemories and SelectMemories' reasons, with nothing stored in the scope.
    assert str(await why.memory_search(scope, SearchMode.HYBRID)).startswith("LLM_OFF: ")
    assert str(await why.memories(scope)).startswith("LLM_OFF: ")
    entities = str(await why.entities(pid, 0))
    assert entities.startswith("LLM_OFF: ") and "entity extraction" in entities


async def test_a_project_with_formation_off_says_so(uow, conv):
    pid, _ = await world(conv, formation=MemoryFormation.OFF)
    reason = str(await reasons(uow).listed(MemoryScope(project_id=pid, user_id="alice"), 0))
    assert reason.startswith(f"FORMATION_OFF: memory formation is OFF for project {pid}"), reason


async def test_with_an_llm_the_jobs_still_pending_are_said(uow, conv):
    pid, _ = await world(conv)
    why = reasons(uow, llm=True)
    reason = str(await why.listed(MemoryScope(project_id=pid, user_id="alice"), 0))
    assert reason == "JOBS_PENDING: 1 exchange still waits for memory formation", reason
    assert str(await why.entities(pid, 0)) == (
        "JOBS_PENDING: 1 exchange still waits for entity extraction"
    )


async def test_nothing_stored_and_nothing_matched_are_told_apart(uow, conv):
    pid, sid = await world(conv, user_id="")
    other = await conv.create_session("", "", 0, {})
    why = reasons(uow)
    assert str(await why.episodes(other.id, 0, SearchMode.HYBRID)) == (
        "NOTHING_STORED: no exchange is stored in this session yet"
    )
    found = str(await why.episodes(sid, 0, SearchMode.KEYWORD))
    assert found.startswith("NO_MATCH: none of the 1 exchange in"), found
    # A project that forms USER memories only, asked without a user: said.
    scope = MemoryScope(project_id=pid)
    assert "forms only USER memories" in str(await why.listed(scope, 0))
    # Memories there, none matching: NO_MATCH, not "nothing stored".
    memories = Memories(FakeDatabase(uow), JobSignals(), None, None)  # type: ignore[arg-type]
    await memories.create(
        {
            "kind": MemoryKind.PROJECT,
            "project_id": pid,
            "title": "port",
            "content": "Postgres runs on port 5433",
        }
    )
    searched = str(await why.memory_search(scope, SearchMode.KEYWORD))
    assert searched.startswith("NO_MATCH: "), searched
    of_kind = str(await why.listed(scope, int(MemoryKind.USER)))
    assert of_kind.startswith("NO_MATCH: ") and "none of kind USER" in of_kind, of_kind


def test_a_selection_the_model_made_empty_says_what_it_read():
    assert str(empty_answers.model_chose_none(2)) == (
        "MODEL_CHOSE_NONE: the selection model read the titles of 2 memories and chose none"
        " for this prompt"
    )
    assert "titles of 1 memory and" in str(empty_answers.model_chose_none(1))


@contextlib.contextmanager
def as_tenant(name: str) -> Iterator[None]:
    """Calls made as a key of tenant ``name`` (it sees that tenant only)."""
    token = tenancy.bind(tenancy.Caller(name))
    try:
        yield
    finally:
        tenancy.reset(token)


async def test_another_tenants_project_always_hears_nothing_stored(uow, conv):
    """The reasons say only what the caller may read: tenant b naming tenant
    a's projects hears exactly what a project that does not exist tells,
    whatever a's settings (formation off) and backlog (exchanges waiting)."""
    why = reasons(uow)

    async def heard(project_id: int) -> list[str]:
        scope = MemoryScope(project_id=project_id, user_id="alice")
        return [
            str(await why.listed(scope, 0)),
            str(await why.memory_search(scope, SearchMode.HYBRID)),
            str(await why.memories(scope)),
        ]

    with as_tenant("a"):
        off, _ = await world(conv, formation=MemoryFormation.OFF, name="off")
        waiting, _ = await world(conv, name="waiting")
        # Tenant a hears its own projects' reasons...
        assert [r.split(":")[0] for r in await heard(off)] == ["FORMATION_OFF"] * 3
        assert [r.split(":")[0] for r in await heard(waiting)] == ["LLM_OFF"] * 3
    with as_tenant("b"):
        # ...tenant b, naming them, what a missing project tells.
        missing = await heard(999_999)
        assert {r.split(":")[0] for r in missing} == {"NOTHING_STORED"}
        assert await heard(off) == missing
        assert await heard(waiting) == missing
