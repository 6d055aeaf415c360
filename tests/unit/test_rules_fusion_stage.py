"""The hybrid fusion stage (domain/retrieval/fusion.py) on plain candidates:
it runs only where a mode has more than one path; a key two paths found is
one hit that names both and keeps the row the first of them read; a key a
path names twice counts at its first rank; each path's raw (key, score) list
is kept for the stages after; and the hits come in the fused order with the
fused scores, each path weighted as the stage was told.

How raw scores become likelihoods is tests/unit/test_fusion.py's; a real
search's fusion over the stores' and the index's paths is the whole-server
tier's (tests/e2e/service/test_search_scores.py).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.fusion import Fusion
from nexus_grpc.domain.retrieval.pipeline import Path, Recipe
from nexus_grpc.domain.retrieval.ranking import PathScores, fused_likelihoods

KW, SEM = SearchSource.KEYWORD, SearchSource.SEMANTIC
WEIGHTS = {KW: 0.7, SEM: 0.3}


class Keyword(Path):
    source = KW

    def temperature(self, engine: Any) -> float:
        return 2.0

    async def find(self, engine: Any, call: Call, n: int) -> list[Candidate]:
        raise AssertionError("fusion reads what the paths found, it asks none")


class Semantic(Keyword):
    source = SEM

    def temperature(self, engine: Any) -> float:
        return 0.1


ENGINE = SimpleNamespace(
    recipe=Recipe(kind=None, paths=(Keyword(), Semantic()), stages=(), candidates=3)
)  # type: ignore[arg-type]


def _call(mode: SearchMode = SearchMode.HYBRID, **found: list[Candidate]) -> Call:
    call = Call("orchids", 10, mode, None)
    call.found = {SearchSource[name.upper()]: ranked for name, ranked in found.items()}
    return call


def _fuse(call: Call) -> list[Candidate]:
    return Fusion(WEIGHTS).apply(ENGINE, call, [], None)  # type: ignore[arg-type]


def test_fusion_runs_only_where_a_mode_has_more_than_one_path():
    fusion = Fusion(WEIGHTS)
    assert fusion.applies(ENGINE, _call(SearchMode.HYBRID))  # type: ignore[arg-type]
    for mode in (SearchMode.KEYWORD, SearchMode.SEMANTIC):
        assert not fusion.applies(ENGINE, _call(mode))  # type: ignore[arg-type]


def test_hits_come_in_the_fused_order_with_the_weighted_scores():
    keyword = [(1, 9.0), (2, 7.0)]
    semantic = [(3, 0.9), (1, 0.8)]
    call = _call(
        keyword=[Candidate(k, s, (KW,)) for k, s in keyword],
        semantic=[Candidate(k, s, (SEM,)) for k, s in semantic],
    )
    fused = _fuse(call)
    expected = fused_likelihoods([PathScores(keyword, 0.7, 2.0), PathScores(semantic, 0.3, 0.1)])
    assert [(c.key, c.score) for c in fused] == expected
    assert [c.key for c in fused] == [1, 3, 2]  # found by both, it leads
    assert fused[0].score == pytest.approx(0.7 + 0.3 * math.exp(-1.0))


def test_a_key_both_paths_found_is_one_hit_naming_both_with_the_first_row_read():
    call = _call(
        keyword=[Candidate(1, 9.0, (KW,), row="kw row"), Candidate(2, 8.0, (KW,))],
        semantic=[Candidate(1, 0.9, (SEM,), row="sem row"), Candidate(2, 0.8, (SEM,), row="r2")],
    )
    by_key = {c.key: c for c in _fuse(call)}
    assert set(by_key) == {1, 2}
    assert by_key[1].sources == (KW, SEM) and by_key[1].row == "kw row"
    # The keyword path left key 2's row unread: the semantic path's row stands.
    assert by_key[2].row == "r2"


def test_a_key_a_path_names_twice_counts_at_its_first_rank():
    call = _call(
        keyword=[Candidate(1, 9.0, (KW,)), Candidate(2, 8.0, (KW,)), Candidate(1, 1.0, (KW,))],
        semantic=[Candidate(2, 0.9, (SEM,)), Candidate(2, 0.1, (SEM,))],
    )
    fused = _fuse(call)
    assert call.raw == {KW: [(1, 9.0), (2, 8.0)], SEM: [(2, 0.9)]}
    assert {c.key: c.sources for c in fused} == {1: (KW,), 2: (KW, SEM)}
    expected = fused_likelihoods(
        [PathScores([(1, 9.0), (2, 8.0)], 0.7, 2.0), PathScores([(2, 0.9)], 0.3, 0.1)]
    )
    assert [(c.key, c.score) for c in fused] == expected


def test_a_path_that_found_nothing_adds_nothing():
    call = _call(keyword=[Candidate(5, 3.0, (KW,))], semantic=[])
    fused = _fuse(call)
    assert [(c.key, c.score, c.sources) for c in fused] == [(5, pytest.approx(0.7), (KW,))]
    assert call.raw == {KW: [(5, 3.0)], SEM: []}
