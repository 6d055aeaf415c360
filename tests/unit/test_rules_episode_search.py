"""SearchEpisodes' scope (domain/retrieval/episode_kind.py), opened on the
fakes: the project's retention moves the searched window's start up to its
cutoff, a window wholly past it answers nothing without a search, a project
with no session answers nothing, the scope's common words leave the keyword
and the vector query (unless nothing else is left), and the last-word
filters hold a row to the scope, the window and the retention; a hit with
no keyword snippet shows its own text, cut.

Episodes' keyword ranking as each store scores it, and a real search over
the index, are the whole-server tier's (tests/e2e/service/test_search_scope.py,
tests/e2e/service/test_project_retention.py): the fakes keep a keyword index
too, but it neither stems nor folds accents, and its exact scores are its own.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from nexus_grpc.core.models import SearchMode, SearchSource, TimeWindow
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.common_terms import ScopeVocabulary
from nexus_grpc.domain.retrieval.episode_kind import (
    SNIPPET_CHARS,
    EpisodeRequest,
    Episodes,
    in_scope,
    in_window,
    retained,
)
from tests.fakes import FakeDatabase, FakeUnitOfWork

DAY = 86_400.0


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


def _project(uow: FakeUnitOfWork, retention: float | None = None, sessions: int = 1):
    project = uow.projects.insert({"name": f"p{len(uow.projects.rows)}", "retention": retention})
    ids = [
        uow.sessions.insert(f"s{project.id}-{i}", "", project.id, {}).id for i in range(sessions)
    ]
    return project.id, ids


async def _open(uow: FakeUnitOfWork, request: EpisodeRequest, text: str = "orchids"):
    call = Call(text, 10, SearchMode.HYBRID, request)
    engine = SimpleNamespace(db=FakeDatabase(uow), vocabulary=ScopeVocabulary())
    opened = await Episodes().open(engine, call)  # type: ignore[arg-type]
    return opened, call


async def test_retention_moves_the_searched_windows_start_up_to_its_cutoff(uow):
    project, (session,) = _project(uow, retention=7 * DAY)
    before = time.time()
    opened, call = await _open(uow, EpisodeRequest(session_id=session))
    assert opened
    cutoff = call.scope.cutoff
    assert before - 7 * DAY <= cutoff <= time.time() - 7 * DAY
    assert call.scope.searched == TimeWindow(cutoff, None) and call.scope.window is None
    # A window that starts after the cutoff is searched as asked; one that
    # starts before it, from the cutoff (its end kept).
    later = TimeWindow(cutoff + DAY, cutoff + 2 * DAY)
    _, call = await _open(uow, EpisodeRequest(project_id=project, window=later))
    assert call.scope.searched == later
    _, call = await _open(
        uow, EpisodeRequest(session_id=session, window=TimeWindow(0.0, cutoff + DAY))
    )
    assert call.scope.searched.start == pytest.approx(cutoff, abs=5)
    assert call.scope.searched.end == cutoff + DAY


async def test_a_window_wholly_past_retention_answers_nothing(uow):
    _, (session,) = _project(uow, retention=7 * DAY)
    old = TimeWindow(None, time.time() - 8 * DAY)
    opened, call = await _open(uow, EpisodeRequest(session_id=session, window=old))
    assert not opened and call.scope is None


async def test_no_retention_searches_the_window_as_asked(uow):
    project, _ = _project(uow)
    window = TimeWindow(10.0, 20.0)
    _, call = await _open(uow, EpisodeRequest(project_id=project, window=window))
    assert (call.scope.cutoff, call.scope.searched, call.scope.window) == (None, window, window)


async def test_a_project_with_no_session_answers_nothing(uow):
    project, _ = _project(uow, sessions=0)
    opened, _ = await _open(uow, EpisodeRequest(project_id=project))
    assert not opened


async def test_the_scopes_common_words_leave_the_keyword_and_the_vector_query(uow):
    project, (a, b) = _project(uow, sessions=2)
    for i in range(40):
        uow.episodes.insert((a, b)[i % 2], f"Caroline: day {i} was fine", "", {}, None)
    _, call = await _open(uow, EpisodeRequest(project_id=project), "Caroline orchids")
    assert "caroline" in call.scope.common
    assert call.scope.semantic_text("Caroline orchids") == "orchids"
    assert "caroline" not in call.scope.match and "orchids" in call.scope.match
    assert call.scope.allowed == frozenset({a, b})


async def test_a_query_of_only_common_words_is_searched_as_it_is(uow):
    project, (a,) = _project(uow)
    for i in range(40):
        uow.episodes.insert(a, f"Caroline said hi {i}", "", {}, None)
    _, call = await _open(uow, EpisodeRequest(project_id=project), "Caroline")
    assert "caroline" in call.scope.common
    assert call.scope.match == '"caroline"'
    assert call.scope.semantic_text("Caroline") == "Caroline"


def test_the_filters_hold_a_row_to_the_scope_the_window_and_the_retention():
    call = Call("x", 10, SearchMode.HYBRID, None)
    call.scope = SimpleNamespace(
        allowed=frozenset({1, 2}), window=TimeWindow(100.0, 200.0), cutoff=150.0
    )
    row = SimpleNamespace(session_id=1, occur_at=150.0)
    assert in_scope(row, call) and in_window(row, call) and retained(row, call)
    assert not in_scope(SimpleNamespace(session_id=3, occur_at=150.0), call)
    assert not in_window(SimpleNamespace(session_id=1, occur_at=200.0), call)  # end is open
    assert not retained(SimpleNamespace(session_id=1, occur_at=149.9), call)
    call.scope = SimpleNamespace(allowed=frozenset({1}), window=None, cutoff=None)
    old = SimpleNamespace(session_id=1, occur_at=0.0)
    assert in_window(old, call) and retained(old, call)


def test_a_hit_with_no_keyword_snippet_shows_its_own_text_cut(uow):
    _, (session,) = _project(uow)
    long = uow.episodes.insert(session, "x" * 200, "", {}, None)
    short = uow.episodes.insert(session, "orchids", "", {}, None)
    call = Call("x", 10, SearchMode.HYBRID, None)
    call.degraded_reason = "semantic search is unavailable"
    kinds = Episodes()
    hit = kinds.hit(Candidate(long.id, 0.5, (SearchSource.KEYWORD,), row=long), call)
    assert hit.snippet == "x" * (SNIPPET_CHARS - 1) + "…" and len(hit.snippet) == SNIPPET_CHARS
    assert hit.degraded_reason == "semantic search is unavailable"
    assert kinds.hit(Candidate(short.id, 0.5, (), row=short), call).snippet == "orchids"
    matched = Candidate(short.id, 0.5, (), row=short, snippet="[orchids]")
    assert kinds.hit(matched, call).snippet == "[orchids]"
