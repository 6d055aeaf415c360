"""Guards found by a mutation audit of the unit tier: rules of entity
resolution's cascade (domain/resolution_rules.py) that no unit test held.

The rest of the cascade is tests/unit/test_resolution.py's."""

from __future__ import annotations

from nexus_grpc.domain.resolution_rules import Match, Mention, Resolver, Unsure
from tests.unit.test_resolution import row


def test_two_near_identical_spellings_are_asked_about_not_matched():
    """One spelling close enough to match is an answer; two are a question."""
    alone = Resolver([row(5, "Kubernetes Operators", "technology")])
    assert alone.decide(Mention("Kubernetes Operator", "technology")) == Match(5, "shingle", 0.857)
    both = Resolver(
        [
            row(5, "Kubernetes Operators", "technology"),
            row(6, "Kubernetes Operatorz", "technology"),
        ]
    )
    decided = both.decide(Mention("Kubernetes Operator", "technology"))
    assert isinstance(decided, Unsure) and set(decided.candidates) == {5, 6}


def test_a_containment_match_scores_the_share_of_words_in_common_to_three_places():
    r = Resolver([row(3, "Priya")])
    assert r.decide(Mention("Priya Raman Iyer", "person")) == Match(3, "containment", 0.333)
