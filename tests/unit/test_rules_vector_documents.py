"""What the vector index holds of a row (core/documents.py) and the filter
values it is handed (core/vectors.py), as plain values: an episode's times
in whole seconds rounded down, an entity's text naming its other names once
and at most eight, a memory's text, a MatchAny's values grouped by type (a
bool is not an int), and the payload index types a collection may declare.

That the index finds rows by these texts and filters on these payloads is
the vector tier's (tests/integration/vectors/) and the whole server's.
"""

from __future__ import annotations

import pytest

from nexus_grpc.core.documents import entity_payload, entity_text, episode_payload, memory_text
from nexus_grpc.core.vectors import check_field_types, split_values


def test_an_episodes_times_are_whole_seconds_rounded_down():
    assert episode_payload(7, 1_700_000_000.9, 1_600_000_000.999) == {
        "sessionId": 7,
        "createdAt": 1_700_000_000,
        "occurAt": 1_600_000_000,
    }
    # Before 1970 too: down, not toward zero (a window widened to whole seconds).
    assert episode_payload(7, 0.0, -1.5)["occurAt"] == -2


def test_an_entitys_text_names_it_its_type_its_other_names_and_its_notes():
    assert entity_text(
        "Ada", "person", "wrote the first program", ["Ada", "Countess", "Countess"]
    ) == ("Ada (person; also Countess): wrote the first program")


def test_an_entity_with_no_notes_or_aliases_is_its_name_and_type():
    assert entity_text("Ada", "person", None) == "Ada (person)"
    assert entity_text("Ada", "person", "") == "Ada (person)"


def test_an_entitys_text_names_at_most_eight_other_names():
    aliases = [f"a{i}" for i in range(12)]
    text = entity_text("Ada", "person", "n", aliases)
    assert "also a0, a1, a2, a3, a4, a5, a6, a7)" in text and "a8" not in text


def test_an_entitys_payload_and_a_memorys_text():
    assert entity_payload(3, 0) == {"projectId": 3, "sessionId": 0}
    assert memory_text("Diet", "no nuts") == "Diet\nno nuts"


def test_filter_values_are_grouped_by_type_and_a_bool_is_not_an_int():
    ints, strs, bools = split_values((1, "a", True, 2, False, True, "b"))
    assert (ints, strs, bools) == ([1, 2], ["a", "b"], [True, False])


def test_a_filter_value_of_another_type_is_refused():
    with pytest.raises(TypeError, match="unsupported filter value 1.5"):
        split_values((1, 1.5))  # type: ignore[arg-type]


def test_a_payload_index_is_an_integer_keyword_or_bool():
    check_field_types({"projectId": "integer", "userId": "keyword", "archived": "bool"})
    with pytest.raises(ValueError, match="field 'score': unknown index type 'float'"):
        check_field_types({"score": "float"})
