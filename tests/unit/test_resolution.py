"""Entity resolution's cascade on its own: key, containment, shingles, else new
(domain/resolution_rules.py), decided over candidate rows as the store hands them over.
The use case around it (the graph read, the model's question, a pending name):
tests/unit/test_resolution_use_case.py."""

from __future__ import annotations

from nexus_grpc.core.graph import PENDING, RESOLVED, CandidateRow
from nexus_grpc.core.names import name_key
from nexus_grpc.domain.resolution_rules import (
    SHINGLE_MATCH,
    Match,
    Mention,
    Novel,
    Resolver,
    Unsure,
    lookups,
)


def row(i: int, name: str, etype: str = "person", *aliases: str, pending: bool = False):
    key = name_key(name, etype)
    keys = frozenset({key, *(name_key(a, etype) for a in aliases)})
    return CandidateRow(
        i, name, key, etype, None, PENDING if pending else RESOLVED, keys, frozenset()
    )


# The rules ------------------------------------------------------------------------


def test_a_names_own_key_resolves_it():
    r = Resolver([row(1, "Priya Raman"), row(2, "Porto", "place")])
    assert r.decide(Mention("priya  RAMAN's", "person")) == Match(1, "exact", 1.0)
    assert r.decide(Mention("Porto", "place")) == Match(2, "exact", 1.0)


def test_part_of_exactly_one_persons_name_resolves_to_that_person():
    r = Resolver([row(1, "Priya Raman"), row(2, "Alex Kim")])
    assert isinstance(m := r.decide(Mention("Priya", "person")), Match) and m.entity_id == 1
    assert m.method == "containment"
    assert r.decide(Mention("Dr. Raman", "person")).entity_id == 1  # type: ignore[union-attr]
    # And the reverse: only "Priya" known, the full name arrives.
    r = Resolver([row(3, "Priya")])
    assert r.decide(Mention("Priya Raman", "person")) == Match(3, "containment", 0.5)


def test_a_name_two_people_carry_is_not_guessed():
    r = Resolver([row(1, "Alex Kim"), row(2, "Alex Chen")])
    decision = r.decide(Mention("Alex", "person"))
    assert isinstance(decision, Unsure) and set(decision.candidates) == {1, 2}
    # Even when one of them already goes by it.
    r = Resolver([row(1, "Alex Kim", "person", "Alex"), row(2, "Alex Chen")])
    assert isinstance(r.decide(Mention("Alex", "person")), Unsure)


def test_types_never_mix_but_technology_and_concept_may():
    r = Resolver([row(1, "Jordan", "person"), row(2, "GraphQL", "concept")])
    assert isinstance(r.decide(Mention("Jordan", "place")), Novel)
    assert r.decide(Mention("GraphQL", "technology")) == Match(2, "exact", 1.0)


def test_near_duplicate_spellings_ask_and_only_near_identity_matches():
    r = Resolver([row(1, "Kubernetes", "technology"), row(2, "Alex Kim")])
    assert isinstance(r.decide(Mention("Kubernets", "technology")), Unsure)
    assert isinstance(r.decide(Mention("Alex Kimm", "person")), Unsure)  # people: never auto
    assert isinstance(r.decide(Mention("Terraform", "technology")), Novel)
    r = Resolver([row(5, "Kubernetes Operators", "technology")])
    decided = r.decide(Mention("Kubernetes Operator", "technology"))
    assert isinstance(decided, Match) and decided.method == "shingle"


def test_a_pending_entity_is_a_candidate_not_an_answer():
    r = Resolver([row(1, "Alex", pending=True), row(2, "Alex Kim")])
    assert isinstance(r.decide(Mention("Alex", "person")), Unsure)


def test_a_diminutive_is_the_one_person_whose_full_name_it_stands_for():
    r = Resolver([row(1, "Katherine Wu"), row(2, "Robert Lee")])
    assert r.decide(Mention("Kate", "person")) == Match(1, "containment", 0.0)
    assert isinstance(r.decide(Mention("Kate", "organization")), Novel)  # people only


def test_part_of_a_things_name_or_its_acronym_is_a_question_never_an_answer():
    r = Resolver([row(1, "ETH Zurich", "organization"), row(2, "Swiss National Science Fund",
                  "organization")])  # fmt: skip
    part = r.decide(Mention("ETH", "organization"))
    assert isinstance(part, Unsure) and part.candidates == (1,)
    acronym = r.decide(Mention("SNSF", "organization"))
    assert isinstance(acronym, Unsure) and acronym.candidates == (2,)


def test_near_duplicates_are_read_only_when_key_and_words_found_nothing():
    asked: list[str] = []

    def nearby(m: Mention):
        asked.append(m.surface)
        return [row(7, "Kubernetes Operators", "technology")]

    r = Resolver([row(1, "Priya Raman")], nearby)
    assert r.decide(Mention("Priya", "person")) == Match(1, "containment", 0.5)
    assert asked == []  # settled before the blocks were read
    decided = r.decide(Mention("Kubernetes Operator", "technology"))
    assert asked == ["Kubernetes Operator"]
    assert isinstance(decided, Match) and decided.entity_id == 7
    assert SHINGLE_MATCH <= decided.score < 1.0


def test_an_entity_added_meanwhile_is_a_candidate_for_the_next_name():
    r = Resolver([])
    assert isinstance(r.decide(Mention("Porto", "place")), Novel)
    r.add(row(3, "Porto", "place"))
    assert r.decide(Mention("porto", "place")) == Match(3, "exact", 1.0)


def test_lookups_read_the_key_its_words_the_full_names_and_the_acronym():
    keys, words = lookups([Mention("Dr. Priya Raman", "person"), Mention("Bob", "person"),
                           Mention("SNSF", "organization")])  # fmt: skip
    assert keys == {"priya raman", "bob", "snsf"}
    assert {"priya", "raman", "robert", "@snsf"} <= words
    assert "@bob" in words  # a short alphabetic key may be an acronym too
