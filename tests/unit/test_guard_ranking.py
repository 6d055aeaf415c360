"""Guards found by a mutation audit of the unit tier: the keyword path's
"no signal" floor (domain/retrieval/ranking.py), which is "at or below
MEANINGFUL_BM25", held at the boundary itself.

The rest of fusion is tests/unit/test_fusion.py's."""

from __future__ import annotations

from nexus_grpc.domain.retrieval.ranking import (
    MEANINGFUL_BM25,
    PathScores,
    fused_likelihoods,
    with_keyword_lead,
)


def test_a_keyword_best_of_exactly_the_floor_leads_nothing():
    ranked = [(3, 0.9), (1, 0.8)]
    assert with_keyword_lead(ranked, [(1, MEANINGFUL_BM25)]) == ranked
    # Just above it, it leads.
    assert with_keyword_lead(ranked, [(1, MEANINGFUL_BM25 * 2)])[0][0] == 1


def test_a_path_whose_best_is_exactly_its_floor_adds_nothing_to_the_fusion():
    at_floor = PathScores([(1, MEANINGFUL_BM25)], 0.5, 2.0, MEANINGFUL_BM25)
    semantic = PathScores([(2, 0.9)], 0.5, 0.1)
    assert fused_likelihoods([at_floor, semantic]) == [(2, 0.5), (1, 0.0)]
