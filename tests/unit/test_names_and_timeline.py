"""Name keys, near-duplicate scores and fact intervals: the pure rules entity
resolution and facts with time stand on."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_grpc.core.graph import ASSERT, END, Evidence
from nexus_grpc.core.names import (
    best_display,
    display_form,
    jaccard,
    name_key,
    shingles,
)
from nexus_grpc.domain.resolution_rules import SHINGLE_ASK, SHINGLE_MATCH
from nexus_grpc.domain.timeline import intervals

# Names --------------------------------------------------------------------------


def test_spellings_of_one_name_share_a_key():
    same = ["Priya Raman", "priya raman", "PRIYA  RAMAN", " Priya\tRaman ", "Priya Raman's"]
    assert {name_key(n, "person") for n in same} == {"priya raman"}
    assert name_key("Dr. Raman", "person") == name_key("Raman", "person") == "raman"
    assert name_key("Prof Priya Raman", "person") == "priya raman"
    assert name_key("José Álvarez", "person") == name_key("Jose Alvarez", "person")
    assert name_key("São Paulo", "place") == "sao paulo"
    assert name_key("ＡＣＭＥ", "organization") == "acme"  # NFKC: full-width letters
    assert name_key("Acme Corp.", "organization") == name_key("ACME", "organization")
    assert name_key("Node.js", "technology") == "nodejs"
    assert name_key("O'Brien", "person") == "obrien"
    assert name_key("James'", "person") == "james"
    assert name_key("The Beatles", "organization") == name_key("Beatles", "organization")


def test_what_tells_names_apart_is_kept():
    # A title is only a title for a person: "St. Louis" is a place's name.
    assert name_key("St. Louis", "place") == "st louis"
    assert name_key("Dr", "person") == "dr"  # a title alone stays a name
    assert name_key("Acme Labs", "organization") != name_key("Acme", "organization")
    assert name_key("The", "concept") == "the"
    assert name_key("!!!", "concept") == "!!!"  # never an empty key


def test_display_form_keeps_case_and_drops_title_and_possessive():
    assert display_form("Dr. Priya Raman's", "person") == "Priya Raman"
    assert display_form("  Lisbon's ", "place") == "Lisbon"
    assert display_form("Dr. Who", "concept") == "Dr. Who"  # only people have titles
    assert best_display(["Priya", "priya raman", "Priya Raman", "Raman"]) == "Priya Raman"
    assert best_display(["ACME", "Acme"]) == "Acme"


# The shingle thresholds of domain/resolution_rules.py, measured on these pairs
# (docs/graph.md). Spelling variants of one name score 0.45-0.75 and
# different names that look alike 0.27-0.58: the ranges overlap, so a
# shingle score only ever asks the LLM, except at near-identity.
SAME_THING = [
    ("kubernetes", "kubernets"),
    ("postgresql", "postgressql"),
    ("javascript", "java script"),
    ("postgres", "postgresql"),
    ("jonathan", "jonathon"),
    ("tensorflow", "tensor flow"),
    ("lisbon", "lisboa"),
]
DIFFERENT = [
    ("java", "javascript"),
    ("react", "react native"),
    ("porto", "porto alegre"),
    ("alex kim", "alex king"),
    ("google", "google cloud"),
    ("kubernetes", "kubernetes engine"),
]


def _score(a: str, b: str) -> float:
    return jaccard(shingles(a), shingles(b))


def test_spelling_variants_score_at_least_the_question_threshold():
    for a, b in SAME_THING:
        assert _score(a, b) >= SHINGLE_ASK, (a, b, _score(a, b))


def test_different_things_never_reach_the_match_threshold():
    for a, b in DIFFERENT:
        assert _score(a, b) < SHINGLE_MATCH, (a, b, _score(a, b))
    # ...while some score above the question threshold: why a shingle score
    # alone asks rather than merges.
    assert max(_score(a, b) for a, b in DIFFERENT) > min(_score(a, b) for a, b in SAME_THING)


# Intervals ----------------------------------------------------------------------

LISBON, PORTO, BERLIN, ACME = 10, 11, 12, 20


def ev(i: int, to: int, at: float, kind: str = ASSERT, episode: int | None = None) -> Evidence:
    return Evidence(i, 1, to, "lives_in", kind, at, episode if episode is not None else i)


def spans(result):
    return [(i.to_id, i.valid_at, i.invalid_at, i.asserted_by, i.ended_by) for i in result]


def test_a_single_valued_fact_ends_its_predecessor_at_the_new_ones_time():
    result = intervals([ev(1, LISBON, 100), ev(2, PORTO, 200)], single_valued=True)
    assert spans(result) == [(LISBON, 100, 200, 1, 2), (PORTO, 200, None, 2, None)]


def test_saying_a_fact_again_is_a_mention_not_a_new_interval():
    result = intervals([ev(1, LISBON, 100), ev(2, LISBON, 150)], single_valued=True)
    assert spans(result) == [(LISBON, 100, None, 1, None)]
    assert result[0].mentions == 2


def test_a_late_episode_enters_as_history_and_ends_nothing_that_began_after_it():
    # Lisbon in March, Porto in June; an exchange from January about Berlin
    # is imported last.
    result = intervals(
        [ev(1, LISBON, 300), ev(2, PORTO, 600), ev(3, BERLIN, 100)], single_valued=True
    )
    assert spans(result) == [
        (BERLIN, 100, 300, 3, 1),
        (LISBON, 300, 600, 1, 2),
        (PORTO, 600, None, 2, None),
    ]


def test_an_end_closes_only_the_interval_it_falls_in():
    facts = [
        Evidence(1, 1, ACME, "works_at", ASSERT, 300, 1),
        Evidence(2, 1, ACME, "works_at", END, 500, 2),
        # An end dated before the fact began ends nothing.
        Evidence(3, 1, ACME, "works_at", END, 100, 3),
        Evidence(4, 1, ACME, "works_at", ASSERT, 800, 4),
    ]
    result = intervals(facts, single_valued=False)
    assert spans(result) == [(ACME, 300, 500, 1, 2), (ACME, 800, None, 4, None)]


def test_multi_valued_labels_hold_many_objects_at_once():
    facts = [Evidence(1, 1, 30, "uses", ASSERT, 100, 1), Evidence(2, 1, 31, "uses", ASSERT, 200, 2)]
    result = intervals(facts, single_valued=False)
    assert [(i.to_id, i.invalid_at) for i in result] == [(30, None), (31, None)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([LISBON, PORTO, BERLIN]),
            st.integers(min_value=1, max_value=50),
            st.sampled_from([ASSERT, ASSERT, ASSERT, END]),
        ),
        min_size=1,
        max_size=8,
        unique_by=lambda t: t[1],  # one thing said at each time
    ),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_the_order_episodes_arrive_in_never_changes_the_intervals(said, single, rnd):
    facts = [ev(i, to, float(at), kind) for i, (to, at, kind) in enumerate(said, 1)]
    expected = spans(intervals(facts, single_valued=single))
    shuffled = list(facts)
    rnd.shuffle(shuffled)
    assert spans(intervals(shuffled, single_valued=single)) == expected
    # Single-valued: never two values at one time.
    if single:
        for a, b in itertools.combinations(intervals(facts, single_valued=True), 2):
            a_end = a.invalid_at if a.invalid_at is not None else float("inf")
            b_end = b.invalid_at if b.invalid_at is not None else float("inf")
            assert a_end <= b.valid_at or b_end <= a.valid_at
