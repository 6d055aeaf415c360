"""Whole semantic-mode searches (domain/retrieval/search.py) on the fakes, with a
scripted embedder and the nearest neighbours a scripted index
(tests/unit/search_stand_ins.py) answers (which may be stale, as a derived
index may briefly be): SearchEpisodes returns, nearest first and at most the
limit, only episodes whose rows exist, in the asking scope and the project's
retention and the window; a keyword search with no word to search answers
nothing without searching; the memories' vector path alone (formation's
similar memories, selection's fallback) keeps only memories the scope sees.

Keyword and hybrid modes as each store ranks them are the whole-server tier's
(tests/e2e/service/test_search_scope.py, test_search_scores.py): the fakes
keep a keyword index too, but it neither stems nor folds accents, and its
exact scores are its own.
"""

from __future__ import annotations

import time

import pytest

from nexus_grpc.core.models import (
    MemoryKind,
    MemoryScope,
    SearchMode,
    SearchSource,
    Tier,
    TimeWindow,
)
from nexus_grpc.domain.retrieval.search import EpisodeSearch, MemorySearch
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.search_stand_ins import Embedder, Index

DAY = 86_400.0


@pytest.fixture
def world():
    """Project p (30 days' retention) with sessions a and b; session c outside
    any project. Episodes: two in a, one in b, one in c, one of a's past
    retention."""
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p", "retention": 30 * DAY}).id
    a, b = (uow.sessions.insert(n, "", project, {}).id for n in ("a", "b"))
    c = uow.sessions.insert("c", "", 0, {}).id
    now = time.time()
    e = {
        "a1": uow.episodes.insert(a, "orchids need light", "", {}, None, occur_at=now - DAY),
        "a2": uow.episodes.insert(a, "ferns like shade", "", {}, None, occur_at=now - 2 * DAY),
        "b1": uow.episodes.insert(b, "cacti need sun", "", {}, None, occur_at=now - 3 * DAY),
        "c1": uow.episodes.insert(c, "roses in june", "", {}, None, occur_at=now),
        "old": uow.episodes.insert(a, "tulips", "", {}, None, occur_at=now - 40 * DAY),
    }
    return uow, {"a": a, "b": b, "c": c, "project": project}, {k: v.id for k, v in e.items()}


async def _episodes(uow, index, session_id, limit=10, **kw):
    search = EpisodeSearch(FakeDatabase(uow), Embedder(), index)  # type: ignore[arg-type]
    mode = kw.pop("mode", SearchMode.SEMANTIC)
    return [h async for h in search.search("plants", session_id, 0, limit, mode, **kw)]


async def test_a_semantic_search_keeps_rows_in_scope_and_retention_nearest_first(world):
    uow, s, e = world
    index = Index(
        (e["c1"], 0.95),  # another scope's point
        (e["b1"], 0.9),
        (e["old"], 0.85),  # past the project's retention
        (9999, 0.8),  # a point whose row is gone
        (e["a1"], 0.7),
        (e["a2"], 0.6),
    )
    hits = await _episodes(uow, index, s["a"])
    assert [h.episode.id for h in hits] == [e["b1"], e["a1"], e["a2"]]
    assert [h.score for h in hits] == [0.9, 0.7, 0.6]  # semantic mode shows the cosine
    assert all(h.sources == (SearchSource.SEMANTIC,) for h in hits)
    assert [h.snippet for h in hits] == ["cacti need sun", "orchids need light", "ferns like shade"]


async def test_a_semantic_search_returns_at_most_its_limit(world):
    uow, s, e = world
    index = Index((e["a1"], 0.9), (e["a2"], 0.8), (e["b1"], 0.7))
    hits = await _episodes(uow, index, s["a"], limit=2)
    assert [h.episode.id for h in hits] == [e["a1"], e["a2"]]


async def test_a_window_keeps_only_episodes_that_occurred_in_it(world):
    uow, s, e = world
    now = time.time()
    index = Index((e["a1"], 0.9), (e["a2"], 0.8), (e["b1"], 0.7))
    window = TimeWindow(now - 2.5 * DAY, now - 1.5 * DAY)
    hits = await _episodes(uow, index, s["a"], window=window)
    assert [h.episode.id for h in hits] == [e["a2"]]


async def test_a_session_outside_any_project_sees_only_its_own(world):
    uow, s, e = world
    index = Index((e["a1"], 0.9), (e["c1"], 0.8))
    hits = await _episodes(uow, index, s["c"])
    assert [h.episode.id for h in hits] == [e["c1"]]


def _no_keyword_search(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"the keyword index was searched: {args}")


async def test_a_keyword_search_with_no_word_answers_nothing_without_searching(world, monkeypatch):
    uow, s, _ = world
    search = EpisodeSearch(FakeDatabase(uow), Embedder(), Index())  # type: ignore[arg-type]
    # The fakes' keyword index answers a search; here one asked for fails the test.
    monkeypatch.setattr(uow.episodes, "keyword_search", _no_keyword_search)
    monkeypatch.setattr(uow.episodes, "keyword_matching", _no_keyword_search)
    hits = [h async for h in search.search("?!", s["a"], 0, 10, SearchMode.KEYWORD)]
    assert hits == []


def _memory(uow: FakeUnitOfWork, project_id: int, tier: Tier = Tier.LONGTERM) -> int:
    values = {
        "kind": int(MemoryKind.PROJECT), "title": "t", "content": f"in {project_id}",
        "tier": int(tier), "project_id": project_id, "agent_id": "", "user_id": "",
        "session_id": 0, "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    return uow.memories.insert(values, None, "t1").id


async def test_the_memories_vector_path_alone_keeps_what_the_scope_sees():
    uow = FakeUnitOfWork()
    mine, archived, theirs = _memory(uow, 1), _memory(uow, 1, Tier.ARCHIVE), _memory(uow, 2)
    index = Index((theirs, 0.95), (archived, 0.9), (mine, 0.5))
    search = MemorySearch(FakeDatabase(uow), Embedder(), index)  # type: ignore[arg-type]
    hits = await search.semantic("diet", MemoryScope(project_id=1), 5)
    assert [(h.memory.id, h.score, h.sources) for h in hits] == [
        (mine, 0.5, (SearchSource.SEMANTIC,))
    ]
    archive = await search.semantic("diet", MemoryScope(project_id=1, include_archived=True), 5)
    assert [h.memory.id for h in archive] == [archived, mine]
