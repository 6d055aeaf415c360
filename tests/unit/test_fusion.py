"""Hybrid scores: each path's score as a likelihood relative to its best hit,
keyword weighted higher, a missing path adds 0; then sessions' cohesion."""

from __future__ import annotations

import math

import pytest

from nexus_grpc.domain.retrieval.ranking import (
    GROUP_COHESION_WEIGHT,
    KEYWORD_LEAD_WITHIN,
    KEYWORD_TEMPERATURE,
    KEYWORD_WEIGHT,
    MEANINGFUL_BM25,
    SEMANTIC_TEMPERATURE,
    PathScores,
    fused_likelihoods,
    with_group_cohesion,
    with_keyword_lead,
)


def fused_scores(keyword, semantic):
    """Two paths fused as the recipes weigh them (keyword, then semantic)."""
    return fused_likelihoods(
        [
            PathScores(keyword, KEYWORD_WEIGHT, KEYWORD_TEMPERATURE, MEANINGFUL_BM25),
            PathScores(semantic, 1.0 - KEYWORD_WEIGHT, SEMANTIC_TEMPERATURE),
        ]
    )


def test_a_hit_both_paths_rank_first_beats_either_alone():
    fused = dict(fused_scores([(1, 8.0), (2, 4.0)], [(1, 0.9), (3, 0.8), (2, 0.1)]))
    assert fused[1] == pytest.approx(1.0)
    assert fused[2] == pytest.approx(
        KEYWORD_WEIGHT * math.exp(-4.0 / KEYWORD_TEMPERATURE)
        + (1 - KEYWORD_WEIGHT) * math.exp(-0.8 / SEMANTIC_TEMPERATURE)
    )
    assert fused[3] == pytest.approx((1 - KEYWORD_WEIGHT) * math.exp(-0.1 / SEMANTIC_TEMPERATURE))
    assert max(fused, key=fused.__getitem__) == 1


def test_a_decisive_keyword_lead_stays_decisive_whatever_the_worst_candidate_scored():
    # Min-max scaling made the gap between 10 and 9 depend on the worst hit
    # (10/10 vs 9/10 here); as a likelihood it is e^(-1/T) either way.
    few = dict(fused_scores([(1, 10.0), (2, 9.0)], []))
    many = dict(fused_scores([(1, 10.0), (2, 9.0), (3, 0.5)], []))
    assert few[2] / few[1] == pytest.approx(many[2] / many[1])
    assert few[2] / few[1] == pytest.approx(math.exp(-1.0 / KEYWORD_TEMPERATURE))


def test_keyword_weighs_more_than_semantic_for_a_top_hit_of_each():
    assert [k for k, _ in fused_scores([(1, 5.0)], [(2, 0.9), (3, 0.2)])][:2] == [1, 2]


def test_a_keyword_list_of_only_ubiquitous_words_adds_nothing():
    fused = dict(fused_scores([(1, 1e-6), (2, 1e-6)], [(3, 0.7), (1, 0.65), (4, 0.2)]))
    assert fused[3] > fused[1] > fused[2] == 0.0
    assert fused[1] == pytest.approx((1 - KEYWORD_WEIGHT) * math.exp(-0.05 / SEMANTIC_TEMPERATURE))


def test_one_path_alone_still_ranks_and_stays_in_range():
    assert fused_scores([], []) == []
    only_semantic = fused_scores([], [(1, 0.4), (2, 0.4)])
    assert [s for _, s in only_semantic] == [pytest.approx(1 - KEYWORD_WEIGHT)] * 2
    only_keyword = fused_scores([(5, 3.0), (6, 1.0)], [])
    assert only_keyword == [
        (5, pytest.approx(KEYWORD_WEIGHT)),
        (6, pytest.approx(KEYWORD_WEIGHT * math.exp(-2.0 / KEYWORD_TEMPERATURE))),
    ]
    assert all(0.0 <= s <= 1.0 for _, s in only_keyword + only_semantic)


def test_a_hit_with_strong_company_in_its_session_overtakes_a_stray_one():
    session = {1: "a", 2: "b", 3: "b", 4: "c"}
    scored = [(1, 0.80), (2, 0.78), (3, 0.70), (4, 0.30)]
    plain = [k for k, _ in scored]
    ranked = with_group_cohesion(scored, session.__getitem__)
    # Without cohesion 1 leads; its session holds nothing else, 2's holds 3.
    assert plain[:2] == [1, 2]
    assert [k for k, _ in ranked][:2] == [2, 1]
    assert all(0.0 <= s <= 1.0 for _, s in ranked)
    top = dict(ranked)[2]
    assert top == pytest.approx((0.78 + GROUP_COHESION_WEIGHT) / (1 + GROUP_COHESION_WEIGHT))


def test_one_session_keeps_the_order_it_was_given():
    scored = [(7, 0.9), (8, 0.5), (9, 0.1)]
    assert [k for k, _ in with_group_cohesion(scored, lambda _: "only")] == [7, 8, 9]
    assert with_group_cohesion([], lambda _: "only") == []


def test_the_keyword_best_goes_first_when_fusion_ranks_it_near_the_top():
    ranked = [(3, 0.9), (1, 0.8), (2, 0.5), (4, 0.1)]
    led = with_keyword_lead(ranked, [(1, 6.0), (2, 5.5)])
    # First, carrying the first place's score so scores still read best first.
    assert led == [(1, 0.9), (3, 0.9), (2, 0.5), (4, 0.1)]
    assert [s for _, s in led] == sorted((s for _, s in led), reverse=True)


def test_a_keyword_best_that_fusion_ranks_low_stays_where_fusion_put_it():
    ranked = [(k, 1.0 - k / 10) for k in range(KEYWORD_LEAD_WITHIN + 2)]
    far = KEYWORD_LEAD_WITHIN + 1  # outside the near-tie at the top
    assert with_keyword_lead(ranked, [(far, 9.0), (0, 1.0)]) == ranked


def test_a_keyword_list_of_only_ubiquitous_words_leads_nothing():
    ranked = [(3, 0.9), (1, 0.8)]
    assert with_keyword_lead(ranked, [(1, 1e-6)]) == ranked
    assert with_keyword_lead(ranked, []) == ranked


def test_every_fused_search_takes_the_keyword_lead():
    # A semantic favourite (7) edges out the keyword best (1) under fusion; the
    # lead (the pipeline's stage after fusion, for every kind) puts it first.
    keyword = [(1, 6.0), (7, 5.9)]
    fused = fused_scores(keyword, [(7, 0.90), (1, 0.89)])
    assert [k for k, _ in fused] == [7, 1]
    led = with_keyword_lead(fused, keyword)
    assert [k for k, _ in led] == [1, 7]
    assert led[0][1] == led[1][1]
