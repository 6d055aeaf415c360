"""The entities' keyword path (domain/retrieval/keyword.py's EntityNames),
on the graph's fake: a query finds the entities it names by any of their
names, a word or two or three in a row, whatever their case; a stopword
alone names nothing; an entity named by a longer name scores by its words
(``Priya Raman`` over ``Priya``); only the searched graph's entities come.
And the episodes' and memories' keyword paths skip a query with no word
left to match without reading anything.

Their full-text ranking as each store scores it, and a real SearchEntities,
are the whole-server tier's (tests/e2e/service/test_graph.py,
test_search_explain.py): the fakes keep a keyword index too, but it neither
stems nor folds accents, and its exact scores are its own.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nexus_grpc.core.models import SearchMode
from nexus_grpc.domain.retrieval.call import Call
from nexus_grpc.domain.retrieval.keyword import EntityNames, EpisodeKeyword, MemoryKeyword
from tests.fakes import FakeDatabase, FakeUnitOfWork


@pytest.fixture
def world():
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, "t1").id
    other = uow.projects.insert({"name": "q"}, "t1").id
    graph = uow.graph

    def entity(where: int, name: str, *aliases: str) -> int:
        entity_id = graph.insert_entity((where, 0), name, "person", None, source="test")
        for alias in aliases:
            graph.add_alias(entity_id, alias, method="test")
        return entity_id

    ids = {
        "priya": entity(project, "Priya Raman", "Priya"),
        "ada": entity(project, "Ada Lovelace", "Countess Lovelace", "the Countess of Lovelace"),
        "elsewhere": entity(other, "Priya"),
    }
    return SimpleNamespace(engine=SimpleNamespace(db=FakeDatabase(uow)), project=project, ids=ids)


async def _named(world, text: str) -> list[tuple[int, float]]:
    call = Call(text, 10, SearchMode.KEYWORD, None)
    call.scope = (world.project, 0)
    return [(c.key, c.score) for c in await EntityNames().find(world.engine, call, 10)]


async def test_an_entity_is_found_by_any_of_its_names_whatever_their_case(world):
    ids = world.ids
    assert await _named(world, "what does priya think") == [(ids["priya"], 1.0)]
    assert await _named(world, "ask COUNTESS LOVELACE") == [(ids["ada"], 2.0)]


async def test_a_name_is_matched_as_one_two_or_three_words_in_a_row_not_more(world):
    assert await _named(world, "ask the countess of lovelace") == []


async def test_the_longest_name_a_query_holds_is_the_score(world):
    ids = world.ids
    assert await _named(world, "did Priya Raman reply to Ada Lovelace") == [
        (ids["priya"], 2.0),
        (ids["ada"], 2.0),
    ]


async def test_a_stopword_alone_names_nothing(world):
    assert await _named(world, "the of") == []


async def test_only_the_searched_graphs_entities_come(world):
    found = await _named(world, "priya")
    assert [key for key, _ in found] == [world.ids["priya"]]


async def test_a_query_with_no_word_left_skips_the_stores_keyword_search():
    call = Call("the", 10, SearchMode.KEYWORD, None)
    call.scope = SimpleNamespace(match=None)
    engine = SimpleNamespace(db=None)  # nothing may be read
    for path in (EpisodeKeyword(), MemoryKeyword()):
        assert path.skips(call)
        assert await path.find(engine, call, 5) == []
        assert await path.matching(engine, call, [1, 2]) == set()
