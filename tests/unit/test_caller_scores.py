"""Scores as callers read them (domain/retrieval/scores.py): positive for
every match, in the stated range, and never reordering what was ranked."""

from __future__ import annotations

import pytest

from nexus_grpc.domain.retrieval.ranking import KEYWORD_WEIGHT
from nexus_grpc.domain.retrieval.scores import keyword_score, lifted_tail


def test_keyword_scores_are_positive_increasing_and_below_one():
    bm25 = [-800.0, -20.0, -1.0, -1e-6, 0.0, 1e-6, 0.5, 2.0, 10.0, 40.0, 800.0]
    shown = [keyword_score(b) for b in bm25]
    assert all(0.0 < s <= 1.0 for s in shown[:-1]), shown
    assert all(a < b for a, b in zip(shown[:-3], shown[1:-2], strict=True)), shown
    assert keyword_score(0.0) == 0.5
    # bm25's floor on a tiny project (1e-6 a word) still reads as a match.
    assert keyword_score(2e-6) > 0.5
    assert keyword_score(4.0) == pytest.approx(1 / (1 + 2.718281828459045**-1))


def test_a_zero_tail_is_lifted_below_the_lowest_score_and_keeps_its_order():
    assert lifted_tail([0.9, 0.4]) == [0.9, 0.4]
    lifted = lifted_tail([0.9, 0.4, 0.0, 0.0, 0.0])
    assert lifted[:2] == [0.9, 0.4]
    assert 0.4 > lifted[2] > lifted[3] > lifted[4] > 0.0
    alone = lifted_tail([0.0, 0.0])
    assert KEYWORD_WEIGHT > alone[0] > alone[1] > 0.0
    assert lifted_tail([]) == []
