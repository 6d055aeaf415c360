"""Three of a search's stages (domain/retrieval/), on plain candidates and
a recipe of plain paths: CallerScores turns the ranking's scores into shown
ones by mode (hybrid's zero tail lifted, reranked hits left as the
reranker scored them; keyword mode's bm25 mapped, only for kinds scored by
bm25; semantic left alone), never reordering; KeywordSnippets reads
snippets only for keyword hits, only when a keyword query is left, and
clears a hit's snippet when the store has none; GroupCohesion asks each
candidate's group, and a candidate whose row is gone forms its own.

The functions they call are tests/unit/test_caller_scores.py's and
tests/unit/test_fusion.py's; the stages run by a real search are the
whole-server tier's (tests/e2e/service/test_search_scores.py).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.cohesion import GroupCohesion
from nexus_grpc.domain.retrieval.pipeline import Path, Recipe
from nexus_grpc.domain.retrieval.ranking import with_group_cohesion
from nexus_grpc.domain.retrieval.scores import CallerScores, keyword_score, lifted_tail
from nexus_grpc.domain.retrieval.snippets import KeywordSnippets

KW, SEM = SearchSource.KEYWORD, SearchSource.SEMANTIC


class Keyword(Path):
    source = KW

    def temperature(self, engine: Any) -> float:
        return 1.0

    async def find(self, engine: Any, call: Call, n: int) -> list[Candidate]:
        raise AssertionError("the stages read what the paths found")


class Semantic(Keyword):
    source = SEM


ENGINE: Any = SimpleNamespace(
    recipe=Recipe(kind=None, paths=(Keyword(), Semantic()), stages=(), candidates=3)  # type: ignore[arg-type]
)


def _call(mode: SearchMode) -> Call:
    return Call("orchids", 10, mode, None)


def _scores(ranked: list[Candidate]) -> list[tuple[int, float]]:
    return [(c.key, c.score) for c in ranked]


def test_hybrid_scores_lift_the_zero_tail_and_leave_reranked_hits_as_scored():
    ranked = [
        Candidate(1, 7.5, (KW, SEM), reranked=True),
        Candidate(2, 0.6, (SEM,)),
        Candidate(3, 0.0, (KW,)),
        Candidate(4, 0.0, (KW,)),
    ]
    shown = CallerScores(bm25=True).apply(ENGINE, _call(SearchMode.HYBRID), ranked, None)
    assert [c.key for c in shown] == [1, 2, 3, 4]  # the order is never changed
    assert _scores(shown) == [(1, 7.5), *zip([2, 3, 4], lifted_tail([0.6, 0.0, 0.0]), strict=True)]
    assert 0.6 > shown[2].score > shown[3].score > 0


def test_keyword_mode_maps_bm25_only_for_kinds_that_score_with_it():
    def ranked() -> list[Candidate]:
        return [Candidate(1, 12.0, (KW,)), Candidate(2, 1e-6, (KW,))]

    stage = CallerScores(bm25=True)
    shown = stage.apply(ENGINE, _call(SearchMode.KEYWORD), ranked(), None)
    assert _scores(shown) == [(1, keyword_score(12.0)), (2, keyword_score(1e-6))]
    # Entities score the words of the longest name matched: left as they are.
    names = CallerScores(bm25=False).apply(ENGINE, _call(SearchMode.KEYWORD), ranked(), None)
    assert _scores(names) == [(1, 12.0), (2, 1e-6)]


def test_semantic_mode_scores_are_the_cosines():
    ranked = [Candidate(1, 0.83, (SEM,)), Candidate(2, 0.2, (SEM,))]
    shown = CallerScores(bm25=True).apply(ENGINE, _call(SearchMode.SEMANTIC), ranked, None)
    assert _scores(shown) == [(1, 0.83), (2, 0.2)]


class Store:
    """Snippets by id, noting what it was asked."""

    def __init__(self, snippets: dict[int, str]) -> None:
        self.by_id = snippets
        self.asked: list[tuple[str, list[int]]] = []

    def __call__(self, uow: Any, match: str, ids: list[int]) -> dict[int, str]:
        self.asked.append((match, list(ids)))
        return {i: s for i, s in self.by_id.items() if i in ids}


def test_snippets_are_read_for_keyword_hits_and_a_hit_without_one_shows_none():
    store = Store({1: "the [orchids] bloomed", 3: ""})
    stage = KeywordSnippets(store, lambda call: '"orchids"')
    ranked = [
        Candidate(1, 0.9, (KW, SEM)),
        Candidate(2, 0.8, (SEM,), snippet="stale"),
        Candidate(3, 0.7, (KW,), snippet="stale"),
    ]
    stage.apply(ENGINE, _call(SearchMode.HYBRID), ranked, uow=object())  # type: ignore[arg-type]
    assert store.asked == [('"orchids"', [1, 3])]
    assert [c.snippet for c in ranked] == ["the [orchids] bloomed", None, None]


@pytest.mark.parametrize(
    ("match", "sources"), [(None, (KW,)), ('"orchids"', (SEM,))], ids=["no query", "no hit"]
)
def test_no_keyword_query_or_no_keyword_hit_reads_no_snippet(match, sources):
    store = Store({1: "x"})
    stage = KeywordSnippets(store, lambda call: match)
    ranked = [Candidate(1, 0.9, sources, snippet="kept")]
    stage.apply(ENGINE, _call(SearchMode.HYBRID), ranked, uow=object())  # type: ignore[arg-type]
    assert store.asked == [] and ranked[0].snippet == "kept"


def test_cohesion_runs_in_hybrid_only_and_each_gone_row_is_a_group_of_its_own():
    groups = {1: "s1", 2: "s2"}  # 4's and 5's rows are gone
    asked: list[list[int]] = []

    def read(uow: Any, keys: list[int]) -> dict[int, str]:
        asked.append(list(keys))
        return {k: groups[k] for k in keys if k in groups}

    stage = GroupCohesion(read)
    assert stage.applies(ENGINE, _call(SearchMode.HYBRID))
    assert not stage.applies(ENGINE, _call(SearchMode.KEYWORD))
    scored = [(1, 0.9), (4, 0.85), (5, 0.84), (2, 0.5)]
    ranked = [Candidate(k, s, (SEM,)) for k, s in scored]
    out = stage.apply(ENGINE, _call(SearchMode.HYBRID), ranked, uow=object())  # type: ignore[arg-type]
    assert asked == [[1, 4, 5, 2]]
    alone = with_group_cohesion(scored, lambda k: groups.get(k, -k))
    assert _scores(out) == alone
    # Had the gone rows shared one group, they would have lifted each other.
    assert alone != with_group_cohesion(scored, lambda k: groups.get(k, "gone"))
