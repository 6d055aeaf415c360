"""Facts with time (domain/facts.py): which labels hold one value at a time,
and a subject's relationships re-derived from its evidence in the store,
whatever order that evidence arrived in."""

from __future__ import annotations

import pytest

from nexus_grpc.core.graph import ASSERT, END
from nexus_grpc.domain.facts import (
    DEFAULT_SINGLE_VALUED_LABELS,
    MAX_LABELS,
    check_labels,
    rederive,
    single_valued,
)
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.store import graph as graph_store
from nexus_grpc.store import graph_evidence as evidence_store
from nexus_grpc.store import projects as project_store

FIELD = "project.single_valued_labels"


def test_labels_are_snake_case_once_each_and_none_means_the_defaults():
    assert check_labels(FIELD, ["works_at", "owns"]) == ("works_at", "owns")
    assert check_labels(FIELD, []) is None
    with pytest.raises(InvalidArgument, match="is not snake_case; the label is 'works_at'") as err:
        check_labels(FIELD, ["Works At"])
    assert err.value.field == FIELD
    with pytest.raises(InvalidArgument, match="names a label twice"):
        check_labels(FIELD, ["owns", "owns"])
    with pytest.raises(InvalidArgument, match="has no letters or digits"):
        check_labels(FIELD, ["--"])
    with pytest.raises(InvalidArgument, match=f"at most {MAX_LABELS}"):
        check_labels(FIELD, [f"l{i}" for i in range(MAX_LABELS + 1)])


def test_a_graph_uses_its_projects_labels_or_else_the_defaults(conn):
    own = project_store.insert(conn, {"name": "jobs", "single_valued_labels": ["owns"]})
    kept = project_store.insert(conn, {"name": "plain"})
    assert single_valued(conn, (own.id, 0)) == frozenset({"owns"})
    assert single_valued(conn, (kept.id, 0)) == frozenset(DEFAULT_SINGLE_VALUED_LABELS)
    assert single_valued(conn, (0, 7)) == frozenset(DEFAULT_SINGLE_VALUED_LABELS)  # a session's


@pytest.fixture
def world(conn):
    """A project's graph: Priya, and the places she may live in."""
    project = project_store.insert(conn, {"name": "p"})
    graph = (project.id, 0)
    ids = {
        name: graph_store.insert_entity(conn, graph, name, etype, None, source="manual")
        for name, etype in [
            ("Priya", "person"),
            ("Porto", "place"),
            ("Lisbon", "place"),
            ("Madrid", "place"),
        ]
    }
    return conn, ids


def held(conn, from_id: int, label: str) -> list[tuple[int, float, float | None]]:
    return [
        tuple(r)
        for r in conn.execute(
            "SELECT to_id, valid_at, invalid_at FROM relationships"
            " WHERE from_id = ? AND label = ? ORDER BY valid_at",
            (from_id, label),
        )
    ]


def say(conn, ids, place: str, at: float, kind: str = ASSERT) -> None:
    evidence_store.add_evidence(conn, ids["Priya"], ids[place], "lives_in", kind, at)


def test_a_new_value_of_a_single_valued_label_ends_the_one_before(world):
    conn, ids = world
    say(conn, ids, "Porto", 100)
    say(conn, ids, "Lisbon", 200)
    rederive(conn, [(ids["Priya"], "lives_in")], frozenset({"lives_in"}))
    assert held(conn, ids["Priya"], "lives_in") == [
        (ids["Porto"], 100, 200),
        (ids["Lisbon"], 200, None),
    ]


def test_evidence_arriving_late_slots_in_at_its_own_time_and_ids_survive(world):
    conn, ids = world
    say(conn, ids, "Porto", 100)
    say(conn, ids, "Lisbon", 200)
    rederive(conn, [(ids["Priya"], "lives_in")], frozenset({"lives_in"}))
    lisbon_row = conn.execute("SELECT id FROM relationships WHERE to_id = ?", (ids["Lisbon"],))
    lisbon_id = lisbon_row.fetchone()[0]
    say(conn, ids, "Madrid", 150)  # an exchange from between the two, imported now
    rederive(conn, [(ids["Priya"], "lives_in")], frozenset({"lives_in"}))
    assert held(conn, ids["Priya"], "lives_in") == [
        (ids["Porto"], 100, 150),
        (ids["Madrid"], 150, 200),
        (ids["Lisbon"], 200, None),
    ]
    again = conn.execute("SELECT id FROM relationships WHERE to_id = ?", (ids["Lisbon"],))
    assert again.fetchone()[0] == lisbon_id  # a client's relationship id still names it


def test_a_label_not_single_valued_keeps_every_value_until_each_is_ended(world):
    conn, ids = world
    say(conn, ids, "Porto", 100)
    say(conn, ids, "Lisbon", 200)
    say(conn, ids, "Porto", 300, END)
    say(conn, ids, "Madrid", 250, END)  # ends nothing: Madrid never held
    rederive(conn, [(ids["Priya"], "lives_in")], frozenset())
    assert held(conn, ids["Priya"], "lives_in") == [
        (ids["Porto"], 100, 300),
        (ids["Lisbon"], 200, None),
    ]


def test_an_entity_related_to_itself_is_no_fact(world):
    conn, ids = world
    evidence_store.add_evidence(conn, ids["Porto"], ids["Porto"], "located_in", ASSERT, 100)
    rederive(conn, [(ids["Porto"], "located_in")], frozenset({"located_in"}))
    assert held(conn, ids["Porto"], "located_in") == []
