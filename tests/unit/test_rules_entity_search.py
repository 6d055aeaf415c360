"""A whole SearchEntities (domain/retrieval/search.py's EntitySearch, its
recipe run by the pipeline) on the graph's fake, with a scripted embedder
and the nearest neighbours a scripted index answers (both of
tests/unit/search_stand_ins.py): an entity the query
names and one it means both come, the one found both ways first; the page
is cut at the limit; with the index down the names still answer, each hit
saying why the answer is less, and with nothing named the search is
UNAVAILABLE rather than empty; ``explain`` says what each path made of
each hit; a bad query or limit is refused.

A real index and the wire are the whole-server tier's
(tests/e2e/service/test_graph.py, test_search_explain.py).
"""

from __future__ import annotations

import pytest

from nexus_grpc.domain.retrieval import explain
from nexus_grpc.domain.retrieval.search import EntitySearch
from nexus_grpc.errors import InvalidArgument, Unavailable
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.search_stand_ins import Embedder, Index


@pytest.fixture
def graph():
    """Project p's graph: Ada Lovelace, Charles Babbage and the Analytical Engine."""
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, "t1").id
    ids = {
        name: uow.graph.insert_entity((project, 0), name, etype, None, source="test")
        for name, etype in (
            ("Ada Lovelace", "person"),
            ("Charles Babbage", "person"),
            ("Analytical Engine", "thing"),
        )
    }
    return uow, project, ids


async def _search(uow, project, index, text="what did Charles Babbage build", limit=10, **kw):
    search = EntitySearch(FakeDatabase(uow), Embedder(), index)  # type: ignore[arg-type]
    return [hit async for hit in search.search(text, project, limit, **kw)]


async def test_an_entity_named_and_one_meant_both_come_the_one_found_both_ways_first(graph):
    uow, project, ids = graph
    babbage, engine = ids["Charles Babbage"], ids["Analytical Engine"]
    hits = await _search(uow, project, Index((engine, 0.8), (babbage, 0.6)))
    assert [h.entity.id for h in hits] == [babbage, engine]
    assert all(0 < h.score <= 1 for h in hits) and hits[0].score > hits[1].score
    assert [h.degraded_reason for h in hits] == ["", ""]


async def test_the_page_is_cut_at_the_limit(graph):
    uow, project, ids = graph
    index = Index(*((i, 0.9 - n / 10) for n, i in enumerate(ids.values())))
    hits = await _search(uow, project, index, limit=1)
    assert [h.entity.id for h in hits] == [ids["Charles Babbage"]]


async def test_with_the_index_down_the_names_answer_and_say_why(graph):
    uow, project, ids = graph
    hits = await _search(uow, project, Index(down=True))
    assert [h.entity.id for h in hits] == [ids["Charles Babbage"]]
    assert hits[0].degraded_reason == "entity search is unavailable: qdrant timed out"


async def test_with_the_index_down_and_nothing_named_the_search_is_unavailable(graph):
    uow, project, _ = graph
    with pytest.raises(Unavailable, match="entity search is unavailable: qdrant timed out"):
        await _search(uow, project, Index(down=True), text="who wrote the first program")


async def test_explain_says_what_each_path_made_of_each_hit(graph):
    uow, project, ids = graph
    babbage, engine = ids["Charles Babbage"], ids["Analytical Engine"]
    hits = await _search(uow, project, Index((engine, 0.8)), explain=True)
    by_id = {h.entity.id: {s.stage: s for s in h.explanation} for h in hits}
    assert by_id[babbage][explain.KEYWORD].rank == 1
    assert by_id[babbage][explain.KEYWORD].note.startswith("matched: babbage, charles")
    assert by_id[engine][explain.SEMANTIC].rank == 1
    # The names path returned fewer than it was asked for: it had no more matches.
    assert by_id[engine][explain.KEYWORD].note == "the query names none of its names"


@pytest.mark.parametrize(("text", "limit"), [("", 10), ("Babbage", -1)])
async def test_a_bad_query_or_limit_is_refused(graph, text, limit):
    uow, project, _ = graph
    with pytest.raises(InvalidArgument):
        await _search(uow, project, Index(), text=text, limit=limit)
