"""The memory rankings outside the search pipeline (domain/retrieval/memory_ranking.py):
SelectMemories' order with the used-memory penalty, and formation's most similar
memories by cosine, each stable on ties."""

from __future__ import annotations

from nexus_grpc.domain.retrieval.memory_ranking import (
    SEMANTIC_SIMILAR,
    USED_PENALTY,
    by_relevance,
    most_similar,
    selection_order,
)


def test_a_used_memory_counts_part_of_its_relevance_and_the_limit_cuts_after_the_order():
    picks = [(1, 0.9, "a"), (2, 0.6, "b"), (3, 0.5, "c")]
    ranked = selection_order(picks, used={1}, limit=2)
    assert ranked == [(2, 0.6, "b"), (3, 0.5, "c")]
    assert selection_order(picks, used=set(), limit=5) == picks
    assert selection_order([(1, 0.8, "a")], used={1}, limit=1) == [(1, 0.8 * USED_PENALTY, "a")]


def test_equal_relevance_keeps_the_order_the_picks_came_in():
    picks = [(7, 0.5, "x"), (3, 0.5, "y"), (9, 1.0, "z"), (1, 0.5, "w")]
    assert [mid for mid, _, _ in selection_order(picks, set(), 10)] == [9, 7, 3, 1]
    assert by_relevance(["b", "a", "c"], {"a": 0.2, "b": 0.2, "c": 0.9}.get) == ["c", "b", "a"]


def test_most_similar_is_by_cosine_above_the_floor_whatever_the_lengths():
    query = [1.0, 0.0]
    candidates = [
        ([0.0, 3.0], "orthogonal"),  # cosine 0: below the floor
        ([10.0, 10.0], "diagonal"),  # cosine 0.707, however long
        ([0.2, 0.0], "same"),  # cosine 1
        ([1.0, 1.0], "diagonal too"),  # ties with "diagonal": keeps its place after it
    ]
    assert SEMANTIC_SIMILAR > 0
    assert most_similar(query, candidates, 5) == ["same", "diagonal", "diagonal too"]
    assert most_similar(query, candidates, 2) == ["same", "diagonal"]
    assert most_similar([0.0, 0.0], candidates, 5) == []
