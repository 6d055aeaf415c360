"""Hybrid scores: both lists on [0, 1], keyword weighted higher, a missing path adds 0."""

from __future__ import annotations

import pytest

from nexus_grpc.domain.ranking import KEYWORD_WEIGHT, fused_scores


def test_a_hit_both_paths_rank_first_beats_either_alone():
    fused = dict(fused_scores([(1, 8.0), (2, 4.0)], [(1, 0.9), (3, 0.8), (2, 0.1)]))
    assert fused[1] == pytest.approx(1.0)
    assert fused[2] == pytest.approx(KEYWORD_WEIGHT * 0.5)
    assert fused[3] == pytest.approx((1 - KEYWORD_WEIGHT) * 0.875)
    assert max(fused, key=fused.__getitem__) == 1


def test_keyword_weighs_more_than_semantic_for_a_top_hit_of_each():
    assert [k for k, _ in fused_scores([(1, 5.0)], [(2, 0.9), (3, 0.2)])][:2] == [1, 2]


def test_a_keyword_list_of_only_ubiquitous_words_adds_nothing():
    fused = dict(fused_scores([(1, 1e-6), (2, 1e-6)], [(3, 0.7), (1, 0.5), (4, 0.2)]))
    assert fused[3] > fused[1] > fused[2] == 0.0
    assert fused[1] == pytest.approx((1 - KEYWORD_WEIGHT) * 0.6)


def test_one_path_alone_still_ranks_and_stays_in_range():
    assert fused_scores([], []) == []
    only_semantic = fused_scores([], [(1, 0.4), (2, 0.4)])
    assert [s for _, s in only_semantic] == [pytest.approx(1 - KEYWORD_WEIGHT)] * 2
    only_keyword = fused_scores([(5, 3.0), (6, 1.5)], [])
    assert only_keyword == [(5, pytest.approx(KEYWORD_WEIGHT)), (6, pytest.approx(0.3))]
    assert all(0.0 <= s <= 1.0 for _, s in only_keyword + only_semantic)
