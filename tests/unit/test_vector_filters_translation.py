"""The one translation of a vector filter (``core.vectors.Filter``) into
Qdrant's conditions (vectors/qdrant_filters.py), on a binding that records
what it is asked to build: no filter for an empty one, each clause in place,
nesting kept, one match-any per value type and an exact match per bool, an
empty match-any that matches nothing. And the embedded engine's own binding
(vectors/edge.py) keeping a bool a bool, which its bindings would otherwise
turn into the integer 1 (and match nothing).

That both indexes return what the filters select, over real points, is
tests/integration/vectors/test_vectors.py's (``test_nested_filter``); the
remote binding (vectors/remote.py, qdrant-client, half a second to import)
is exercised there too."""

from __future__ import annotations

from typing import Any

import pytest

from nexus_grpc.core.vectors import Filter, MatchAny, Range
from nexus_grpc.vectors.edge import to_edge_filter
from nexus_grpc.vectors.qdrant_filters import Conditions, translate

#: Each condition as a tuple naming what was built.
RECORD = Conditions(
    filter=lambda must, should, must_not: ("filter", must, should, must_not),
    range=lambda key, gte, lte: ("range", key, gte, lte),
    any_of=lambda key, values: ("any", key, values),
    equals=lambda key, value: ("equals", key, value),
)


def built(f: Filter | None) -> Any:
    return translate(f, RECORD)


def test_no_filter_and_an_empty_one_are_no_filter() -> None:
    assert built(None) is None
    assert built(Filter()) is None


def test_each_clause_keeps_its_place_and_an_empty_clause_is_none() -> None:
    f = Filter(
        must=(MatchAny("user", (1,)),),
        should=(MatchAny("kind", ("fact",)),),
        must_not=(MatchAny("user", (2,)),),
    )
    assert built(f) == (
        "filter",
        [("any", "user", [1])],
        [("any", "kind", ["fact"])],
        [("any", "user", [2])],
    )
    assert built(Filter(should=(MatchAny("kind", ("event",)), MatchAny("user", (2,))))) == (
        "filter",
        None,
        [("any", "kind", ["event"]), ("any", "user", [2])],
        None,
    )


def test_a_nested_filter_is_translated_in_place() -> None:
    f = Filter(
        must=(
            MatchAny("user", (0, 1)),
            Filter(should=(MatchAny("kind", ("fact", "event")), MatchAny("pinned", (True,)))),
        ),
        must_not=(MatchAny("pinned", (False,)), MatchAny("user", (1,))),
    )
    assert built(f) == (
        "filter",
        [
            ("any", "user", [0, 1]),
            (
                "filter",
                None,
                [("any", "kind", ["fact", "event"]), ("equals", "pinned", True)],
                None,
            ),
        ],
        None,
        [("equals", "pinned", False), ("any", "user", [1])],
    )


def test_a_range_keeps_its_open_bounds() -> None:
    f = Filter(must=(Range("created", gte=10.0), Range("score", lte=0.5)))
    assert built(f) == (
        "filter",
        [("range", "created", 10.0, None), ("range", "score", None, 0.5)],
        None,
        None,
    )


def test_mixed_values_are_one_match_per_type_any_of_which_may_hold() -> None:
    # Qdrant's match-any takes only ints or only strings, and no bools.
    f = Filter(must=(MatchAny("text", ("t5", 123, "t6", True, 7)),))
    assert built(f) == (
        "filter",
        [
            (
                "filter",
                None,
                [
                    ("any", "text", [123, 7]),
                    ("any", "text", ["t5", "t6"]),
                    ("equals", "text", True),
                ],
                None,
            )
        ],
        None,
        None,
    )


def test_both_bools_are_two_exact_matches_and_a_repeated_bool_one() -> None:
    both = built(Filter(must=(MatchAny("pinned", (True, False, True)),)))
    assert both == (
        "filter",
        [("filter", None, [("equals", "pinned", True), ("equals", "pinned", False)], None)],
        None,
        None,
    )
    # A bool is not the integer 1: it is never put in an int match-any.
    assert built(Filter(must=(MatchAny("pinned", (True,)),))) == (
        "filter",
        [("equals", "pinned", True)],
        None,
        None,
    )


def test_an_empty_match_any_matches_nothing() -> None:
    assert built(Filter(must=(MatchAny("user", ()),))) == (
        "filter",
        [("any", "user", [])],
        None,
        None,
    )


def test_a_value_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match="unsupported filter value 1.5"):
        built(Filter(must=(MatchAny("user", (1.5,)),)))  # type: ignore[arg-type]


def test_the_embedded_engine_keeps_a_bool_a_bool() -> None:
    pinned = repr(to_edge_filter(Filter(must=(MatchAny("pinned", (True,)),))))
    assert "MatchValue(value=True)" in pinned, pinned
    assert "MatchValue(value=1)" not in pinned
    assert to_edge_filter(Filter()) is None
