"""Which exchanges form memories, and of which kind (domain/formation.py): a
project's setting (USER by default) and whether the session names its user
decide; what extraction keeps for the job is only what may form.

The job's decisions against kept memories (identical, similar, the time rule,
the cap), with a scripted model: tests/unit/test_formation_job.py; the worker's
wiring through a whole server: tests/e2e/service/test_memory_formation.py."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from nexus_grpc.core.models import Episode, JobState, MemoryFormation, Session
from nexus_grpc.domain.formation import HANDOFF, Forms, candidates_for, forms_for
from nexus_grpc.llm.formation_prompts import FORM_USER, FORM_USER_AND_PROJECT, MemoryCandidate
from tests.fakes import FakeUnitOfWork

ABOUT_USER = MemoryCandidate("user", "home", "I live in Porto", "longterm", "I live in Porto")
ABOUT_PROJECT = MemoryCandidate("project", "db", "We use SQLite", "longterm", "We use SQLite")


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


def project(uow, formation: MemoryFormation | None) -> int:
    values = {"name": f"p{formation}"}
    if formation is not None:
        values["memory_formation"] = int(formation)
    return uow.projects.insert(values).id


@pytest.mark.parametrize(
    ("setting", "user_id", "expected"),
    [
        (None, "ann", Forms("ann", False)),  # the default: USER memories
        (None, "", None),  # ... of nobody: nothing
        (MemoryFormation.OFF, "ann", None),
        (MemoryFormation.USER, "ann", Forms("ann", False)),
        (MemoryFormation.USER_AND_PROJECT, "", Forms("", True)),
        (MemoryFormation.USER_AND_PROJECT, "ann", Forms("ann", True)),
    ],
)
def test_the_projects_setting_and_the_sessions_user_decide(uow, setting, user_id, expected):
    session = Session(1, "s1", project_id=project(uow, setting), user_id=user_id)
    assert forms_for(uow, session, written_for(user_id)) == expected


def written_for(user_id: str) -> Episode:
    """An episode whose writer acted for ``user_id``."""
    return Episode(1, 1, "hi", "ok", acts_for=user_id)


def test_a_session_outside_any_project_forms_nothing(uow):
    assert forms_for(uow, Session(1, "s1", user_id="ann"), written_for("ann")) is None


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (None, None),  # USER memories only: nothing forms
        (MemoryFormation.USER_AND_PROJECT, Forms("", True)),  # the project's still form
    ],
)
def test_user_memories_form_only_for_the_user_the_writer_acted_for(uow, setting, expected):
    """Formation runs with no caller: the right its writer had, recorded on
    the episode, is checked again there (docs/security.md)."""
    session = Session(1, "s1", project_id=project(uow, setting), user_id="ann")
    for acted_for in ("", "bob"):
        assert forms_for(uow, session, written_for(acted_for)) == expected


def test_what_forms_picks_the_prompt_and_what_is_kept():
    user_only, both = Forms("ann", False), Forms("ann", True)
    assert user_only.prompt == FORM_USER and both.prompt == FORM_USER_AND_PROJECT
    assert Forms("", False).prompt is None
    candidates = [ABOUT_USER, ABOUT_PROJECT]
    assert candidates_for(user_only, candidates) == [asdict(ABOUT_USER)]
    assert candidates_for(Forms("", True), candidates) == [asdict(ABOUT_PROJECT)]
    assert candidates_for(both, candidates) == [asdict(ABOUT_USER), asdict(ABOUT_PROJECT)]
    assert candidates_for(None, candidates) == []


def test_a_failed_extraction_fails_formation_saying_so_once(uow):
    """The extraction worker's dead-letter reason already names its stage;
    formation's error on the episode says it once, and says it where the
    reason did not."""
    session = uow.sessions.insert("s1", "s1", project(uow, None), {}, user_id="ann")
    said, bare = (uow.episodes.insert(session.id, "hi", "ok", {}, None) for _ in range(2))
    for episode in (said, bare):
        uow.episodes.set_memory_state(episode.id, JobState.PENDING)
    HANDOFF.extraction_failed(uow, said.id, "extraction failed: Ollama answered HTTP 500")
    HANDOFF.extraction_failed(uow, bare.id, "the job's lease ran out")
    assert uow.episodes.find(said.id).memory_error == "extraction failed: Ollama answered HTTP 500"
    assert uow.episodes.find(bare.id).memory_error == "extraction failed: the job's lease ran out"
    assert {uow.episodes.find(e.id).memory_state for e in (said, bare)} == {JobState.FAILED}
