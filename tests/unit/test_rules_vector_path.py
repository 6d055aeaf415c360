"""The vector paths (domain/retrieval/vector.py), given a scripted embedder
and the nearest neighbours a scripted index answers: a neighbour below the
embedder's floor matched nothing (left out, and explain says so), equal
scores come newest first, an episode search's filter names its sessions and
its window widened to whole seconds, memories and entities keep only the
rows the store still shows in their scope, and an embedder or index that is
down makes the path UNAVAILABLE.

A real index's neighbours, and a hybrid search going on without this path,
are the whole-server tier's (tests/e2e/service/test_search_scores.py,
test_search_honesty.py).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from nexus_grpc.core.models import MemoryKind, MemoryScope, SearchMode, SearchSource, Tier
from nexus_grpc.core.vectors import Filter, MatchAny, Range, VectorHit, VectorIndexUnavailable
from nexus_grpc.domain.retrieval import explain
from nexus_grpc.domain.retrieval.call import Call
from nexus_grpc.domain.retrieval.explain import Trace
from nexus_grpc.domain.retrieval.vector import EntityVector, EpisodeVector, MemoryVector
from nexus_grpc.embedding import EmbedderUnavailable
from nexus_grpc.errors import Unavailable
from tests.fakes import FakeDatabase, FakeUnitOfWork

SEM = SearchSource.SEMANTIC


class Embedder:
    similarity_floor = 0.1
    similarity_temperature = 0.05

    def __init__(self, fault: Exception | None = None) -> None:
        self.fault = fault
        self.asked: list[str] = []

    async def embed_query(self, text: str) -> list[float]:
        self.asked.append(text)
        if self.fault is not None:
            raise self.fault
        return [1.0, 0.0]


class Index:
    """Answers every search with ``hits`` ((id, cosine) pairs), noting what it was asked."""

    def __init__(self, *hits: tuple[int, float], fault: Exception | None = None) -> None:
        self.hits = [VectorHit(i, s, {}) for i, s in hits]
        self.fault = fault
        self.asked: list[tuple[str, Filter, int]] = []

    async def search(self, collection: str, vector, *, filter: Filter, limit: int):
        self.asked.append((collection, filter, limit))
        if self.fault is not None:
            raise self.fault
        return self.hits


def _engine(index: Index, embedder: Embedder | None = None, uow: FakeUnitOfWork | None = None):
    return SimpleNamespace(
        embedder=embedder or Embedder(), index=index, db=FakeDatabase(uow or FakeUnitOfWork())
    )


def _episode_call(session_ids=(4, 5), window=None) -> Call:
    call = Call("which port is the database on", 10, SearchMode.SEMANTIC, None)
    call.scope = SimpleNamespace(
        session_ids=session_ids, searched=window, semantic_text=lambda text: f"[{text}]"
    )
    return call


async def test_a_neighbour_below_the_floor_matched_nothing_and_explain_says_so():
    index = Index((1, 0.8), (2, -0.029), (3, 0.0999))
    engine = _engine(index)
    call = _episode_call()
    found = await EpisodeVector().find(engine, call, 3)
    assert [(c.key, c.score, c.sources) for c in found] == [(1, 0.8, (SEM,))]
    assert call.below_floor[SEM] == [(2, -0.029), (3, 0.0999)]
    trace = Trace()
    EpisodeVector().explain_found(engine, call, trace)
    (entry,) = [s for s in trace.explanation(2) if s.stage == explain.SEMANTIC]
    assert entry.note == "cosine -0.029, below 0.1: its meaning matched nothing"


async def test_equal_scores_come_newest_first():
    index = Index((3, 0.5), (9, 0.5), (5, 0.7), (7, 0.5))
    found = await EpisodeVector().find(_engine(index), _episode_call(), 4)
    assert [c.key for c in found] == [5, 9, 7, 3]


async def test_an_episode_search_filters_on_its_sessions_and_the_embedded_text_is_the_scopes():
    index = Index()
    embedder = Embedder()
    await EpisodeVector().find(_engine(index, embedder), _episode_call((4, 5)), 7)
    assert embedder.asked == ["[which port is the database on]"]
    assert index.asked == [("episodes", Filter(must=(MatchAny("sessionId", (4, 5)),)), 7)]


@pytest.mark.parametrize(
    ("start", "end", "gte", "lte"),
    [
        (100.25, 200.5, 100, 200),
        (100.0, 200.0, 100, 199),
        (None, 50.1, None, 50),
        (7.9, None, 7, None),
    ],
)
async def test_a_window_is_widened_to_the_whole_seconds_it_touches(start, end, gte, lte):
    index = Index()
    window = SimpleNamespace(start=start, end=end)
    await EpisodeVector().find(_engine(index), _episode_call((4,), window), 5)
    (_, flt, _) = index.asked[0]
    assert flt.must == (MatchAny("sessionId", (4,)), Range("occurAt", gte=gte, lte=lte))


@pytest.mark.parametrize(
    ("path", "says"),
    [
        (EpisodeVector(), "semantic search is unavailable"),
        (EntityVector(), "entity search is unavailable"),
    ],
)
async def test_an_embedder_or_index_that_is_down_makes_the_path_unavailable(path, says):
    call = _episode_call()
    call.scope = (1, 0) if isinstance(path, EntityVector) else call.scope
    down = _engine(Index(), Embedder(EmbedderUnavailable("connection refused")))
    with pytest.raises(Unavailable, match=f"{says}: connection refused"):
        await path.find(down, call, 3)
    gone = _engine(Index(fault=VectorIndexUnavailable("qdrant timed out")))
    with pytest.raises(Unavailable, match=f"{says}: qdrant timed out"):
        await path.find(gone, call, 3)


def _memory(uow: FakeUnitOfWork, project_id: int, tier: Tier = Tier.LONGTERM) -> int:
    values = {
        "kind": int(MemoryKind.PROJECT), "title": "t", "content": "c", "tier": int(tier),
        "project_id": project_id, "agent_id": "", "user_id": "", "session_id": 0,
        "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    return uow.memories.insert(values, None, "t1").id


def _memory_call(scope: MemoryScope, flt: Filter | None) -> Call:
    call = Call("diet", 10, SearchMode.SEMANTIC, None)
    call.scope = SimpleNamespace(
        vector_filter=flt, scope=scope, now=None, semantic_text=lambda text: text
    )
    return call


async def test_memory_hits_keep_only_rows_the_store_shows_in_the_scope():
    uow = FakeUnitOfWork()
    mine, archived, theirs = _memory(uow, 1), _memory(uow, 1, Tier.ARCHIVE), _memory(uow, 2)
    index = Index((mine, 0.9), (archived, 0.8), (theirs, 0.7), (999, 0.6))  # 999: row gone
    flt = Filter(must=(MatchAny("projectId", (1,)),))
    found = await MemoryVector().find(
        _engine(index, uow=uow), _memory_call(MemoryScope(project_id=1), flt), 5
    )
    assert [(c.key, c.row.id) for c in found] == [(mine, mine)]
    assert index.asked == [("memories", flt, 5)]


async def test_a_memory_scope_that_sees_nothing_asks_nothing():
    index, embedder = Index((1, 0.9)), Embedder()
    found = await MemoryVector().find(
        _engine(index, embedder), _memory_call(MemoryScope(), None), 5
    )
    assert found == [] and index.asked == [] and embedder.asked == []


async def test_entity_hits_keep_only_entities_still_in_the_searched_graph():
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, "t1").id
    other = uow.projects.insert({"name": "q"}, "t1").id
    here = uow.graph.insert_entity((project, 0), "Ada", "person", None, source="test")
    there = uow.graph.insert_entity((other, 0), "Bob", "person", None, source="test")
    index = Index((here, 0.9), (there, 0.8), (12345, 0.7))
    call = Call("Ada", 10, SearchMode.SEMANTIC, None)
    call.scope = (project, 0)
    found = await EntityVector().find(_engine(index, uow=uow), call, 5)
    assert [(c.key, c.row.name) for c in found] == [(here, "Ada")]
    (_, flt, _) = index.asked[0]
    assert flt == Filter(must=(MatchAny("projectId", (project,)), MatchAny("sessionId", (0,))))


def test_the_paths_score_at_the_embedders_temperature():
    engine: Any = _engine(Index())
    assert EpisodeVector().temperature(engine) == 0.05
