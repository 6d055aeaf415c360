"""Why a graph holds no entity (domain/empty_answers.py, ``EmptyAnswers.graph``),
decided on the fakes of tests/fakes.py: nothing stored yet, exchanges
waiting for an LLM or for extraction, or extraction that found nothing; a
project or session the caller cannot see reads as a graph with nothing
stored, in the same words.

When a client is told (ListEntities' first page, unfiltered, empty: the
x-nexus-empty-reason trailer) is tests/e2e/service/test_graph_empty_reason.py's."""

from __future__ import annotations

import pytest

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import JobState
from nexus_grpc.domain.empty_answers import EmptyAnswers
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.seeding import project_session

NOTHING = (
    "NOTHING_STORED: no entity is stored in this graph, and no exchange of it is stored to"
    " extract one from (entities come from a project's conversations, or UpsertEntity)"
)


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def without_llm(uow: FakeUnitOfWork) -> EmptyAnswers:
    return EmptyAnswers(FakeDatabase(uow), llm_configured=False)


@pytest.fixture
def with_llm(uow: FakeUnitOfWork) -> EmptyAnswers:
    return EmptyAnswers(FakeDatabase(uow), llm_configured=True)


def say(uow: FakeUnitOfWork, session_id: int, n: int = 1) -> list[int]:
    return [uow.episodes.insert(session_id, "I moved to Porto.", "", {}, None).id for _ in range(n)]


async def why(answers: EmptyAnswers, project_id: int = 0, session_id: int = 0) -> str:
    return str(await answers.graph(project_id, session_id))


async def test_a_graph_with_no_exchange_has_nothing_stored_and_so_does_one_not_there(
    uow, without_llm
):
    pid, _ = project_session(uow)
    assert await why(without_llm, pid) == NOTHING
    # A project that does not exist says the same.
    assert await why(without_llm, pid + 1000) == NOTHING
    assert await why(without_llm, 0, 999) == NOTHING


async def test_another_tenants_project_and_session_read_as_nothing_stored(uow, without_llm):
    pid, sid = project_session(uow)
    say(uow, sid)
    lone = uow.sessions.insert("lone", "", 0, {}, "default").id
    say(uow, lone)
    assert (await why(without_llm, pid)).startswith("LLM_OFF")  # its own tenant sees them
    token = tenancy.bind(tenancy.Caller("team"))
    try:
        assert await why(without_llm, pid) == NOTHING
        assert await why(without_llm, 0, lone) == NOTHING
    finally:
        tenancy.reset(token)


async def test_exchanges_waiting_without_an_llm_say_no_llm_is_configured(uow, without_llm):
    pid, sid = project_session(uow)
    say(uow, sid)
    waiting = await why(without_llm, pid)
    assert waiting.startswith("LLM_OFF: no LLM server is configured"), waiting
    assert waiting.endswith("1 exchange waits for entity extraction"), waiting
    say(uow, sid)
    assert (await why(without_llm, pid)).endswith("2 exchanges wait for entity extraction")


async def test_exchanges_waiting_for_a_configured_llm_say_they_still_wait(uow, with_llm):
    pid, sid = project_session(uow)
    say(uow, sid, 2)
    assert await why(with_llm, pid) == (
        "JOBS_PENDING: 2 exchanges still wait for entity extraction"
    )


async def test_extraction_that_found_nothing_says_how_many_exchanges_it_read(uow, with_llm):
    pid, sid = project_session(uow)
    for episode in say(uow, sid, 3):
        uow.episodes.set_extract_state(episode, JobState.DONE)
    found = await why(with_llm, pid)
    assert found.startswith("NOTHING_STORED: no entity is stored in this graph: extraction")
    assert "found none in its 3 exchanges" in found, found


async def test_a_session_outside_a_project_is_its_own_graph(uow, without_llm):
    lone = uow.sessions.insert("lone", "", 0, {}, "default").id
    pid, sid = project_session(uow)
    say(uow, sid)  # the project's exchange is no part of the lone session's graph
    assert await why(without_llm, 0, lone) == NOTHING
    say(uow, lone)
    assert (await why(without_llm, 0, lone)).endswith("1 exchange waits for entity extraction")
