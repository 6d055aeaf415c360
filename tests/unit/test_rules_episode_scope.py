"""Which sessions a search may see (domain/retrieval/episode_scope.py), on
the fakes: a session outside any project sees its own episodes, one in a
project every session of the project, one taken out of its project its own
again from the next call; another tenant's session or project answers as a
missing one; a session and a project that disagree, or neither given, are
refused; and a session's own graph exists only outside a project.

That every search mode is confined by it over the wire is the whole-server
tier's: tests/e2e/service/test_search_scope.py.
"""

from __future__ import annotations

import pytest

from nexus_grpc.domain.retrieval.episode_scope import check_session_graph, episode_scope
from nexus_grpc.errors import FailedPrecondition, InvalidArgument, NotFound
from tests.fakes import FakeUnitOfWork
from tests.unit.callers import acting_as


@pytest.fixture
def uow() -> FakeUnitOfWork:
    """Tenant t1: project p with sessions a and b, project q with c, and d outside any."""
    uow = FakeUnitOfWork()
    p = uow.projects.insert({"name": "p"}, "t1").id
    q = uow.projects.insert({"name": "q"}, "t1").id
    for name, project in (("a", p), ("b", p), ("c", q), ("d", 0)):
        uow.sessions.insert(name, "", project, {}, "t1")
    return uow


def _ids(uow: FakeUnitOfWork, *names: str) -> list[int]:
    by_name = {s.external_id: s.id for s in uow.sessions.rows.values()}
    return [by_name[n] for n in names]


def _project(uow: FakeUnitOfWork, name: str) -> int:
    return next(p.id for p in uow.projects.rows.values() if p.name == name)


def test_a_session_outside_any_project_sees_only_itself(uow):
    (d,) = _ids(uow, "d")
    assert episode_scope(uow, d, 0) == [d]


def test_a_session_in_a_project_sees_every_session_of_the_project(uow):
    a, b = _ids(uow, "a", "b")
    assert sorted(episode_scope(uow, a, 0)) == [a, b]
    assert sorted(episode_scope(uow, b, _project(uow, "p"))) == [a, b]


def test_a_project_sees_its_sessions(uow):
    (c,) = _ids(uow, "c")
    assert episode_scope(uow, 0, _project(uow, "q")) == [c]


def test_a_session_taken_out_of_its_project_sees_only_itself_from_the_next_call(uow):
    a, b = _ids(uow, "a", "b")
    uow.sessions.update(b, {"project_id": None})
    assert episode_scope(uow, b, 0) == [b]
    assert episode_scope(uow, a, 0) == [a]


def test_another_tenants_session_or_project_answers_as_a_missing_one(uow):
    (a,) = _ids(uow, "a")
    p = _project(uow, "p")
    with acting_as("t2"):
        with pytest.raises(NotFound, match=f"session {a} does not exist"):
            episode_scope(uow, a, 0)
        with pytest.raises(NotFound, match=f"project {p} does not exist") as err:
            episode_scope(uow, 0, p)
    assert err.value.details[0].resource_type == "project"
    with pytest.raises(NotFound, match="project 999 does not exist"):
        episode_scope(uow, 0, 999)
    with acting_as("t1"):
        assert a in episode_scope(uow, a, 0)


def test_a_session_and_a_project_that_disagree_are_refused_naming_both(uow):
    (c,) = _ids(uow, "c")
    p = _project(uow, "p")
    with pytest.raises(InvalidArgument, match=f"session {c} is not in project_id {p}") as err:
        episode_scope(uow, c, p)
    assert [d.field for d in err.value.details] == ["session_id", "project_id"]


def test_a_search_names_a_session_or_a_project(uow):
    with pytest.raises(InvalidArgument, match="session_id or project_id is required") as err:
        episode_scope(uow, 0, 0)
    assert [d.field for d in err.value.details] == ["session_id", "project_id"]
    with pytest.raises(InvalidArgument) as bad:
        episode_scope(uow, -1, 0)
    assert bad.value.field == "session_id"


def test_a_sessions_own_graph_exists_only_outside_a_project(uow):
    a, d = _ids(uow, "a", "d")
    check_session_graph(uow, d)
    p = _project(uow, "p")
    with pytest.raises(FailedPrecondition, match=f"use project_id {p}"):
        check_session_graph(uow, a)
    with acting_as("t2"), pytest.raises(NotFound):
        check_session_graph(uow, d)
