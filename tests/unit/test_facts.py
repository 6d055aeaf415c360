"""Facts with time (domain/facts.py): which labels hold one value at a time,
and a subject's relationships re-derived from its evidence in the store,
whatever order that evidence arrived in."""

from __future__ import annotations

import pytest

from nexus_grpc.core.graph import ASSERT, END, HISTORY
from nexus_grpc.domain.facts import (
    DEFAULT_SINGLE_VALUED_LABELS,
    MAX_LABELS,
    check_labels,
    rederive,
    single_valued,
)
from nexus_grpc.errors import InvalidArgument
from tests.fakes import FakeUnitOfWork

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


def test_a_graph_uses_its_projects_labels_or_else_the_defaults():
    uow = FakeUnitOfWork()
    own = uow.projects.insert({"name": "jobs", "single_valued_labels": ["owns"]})
    kept = uow.projects.insert({"name": "plain"})
    assert single_valued(uow, (own.id, 0)) == frozenset({"owns"})
    assert single_valued(uow, (kept.id, 0)) == frozenset(DEFAULT_SINGLE_VALUED_LABELS)
    assert single_valued(uow, (0, 7)) == frozenset(DEFAULT_SINGLE_VALUED_LABELS)  # a session's


@pytest.fixture
def world():
    """A project's graph: Priya, and the places she may live in."""
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"})
    graph = (project.id, 0)
    ids = {
        name: uow.graph.insert_entity(graph, name, etype, None, source="manual")
        for name, etype in [
            ("Priya", "person"),
            ("Porto", "place"),
            ("Lisbon", "place"),
            ("Madrid", "place"),
        ]
    }
    return uow, ids


def held(uow, from_id: int, label: str) -> list[tuple[int, float, float | None]]:
    return sorted(
        ((r.to_id, r.valid_at, r.invalid_at)
         for r in uow.graph.list_relationships(from_id, False, when=HISTORY)
         if r.label == label),
        key=lambda r: r[1],
    )  # fmt: skip


def relationship_id(uow, from_id: int, to_id: int) -> int:
    [found] = [
        r.id for r in uow.graph.list_relationships(from_id, False, when=HISTORY) if r.to_id == to_id
    ]
    return found


def say(uow, ids, place: str, at: float, kind: str = ASSERT) -> None:
    uow.graph.add_evidence(ids["Priya"], ids[place], "lives_in", kind, at)


def test_a_new_value_of_a_single_valued_label_ends_the_one_before(world):
    uow, ids = world
    say(uow, ids, "Porto", 100)
    say(uow, ids, "Lisbon", 200)
    rederive(uow, [(ids["Priya"], "lives_in")], frozenset({"lives_in"}))
    assert held(uow, ids["Priya"], "lives_in") == [
        (ids["Porto"], 100, 200),
        (ids["Lisbon"], 200, None),
    ]


def test_evidence_arriving_late_slots_in_at_its_own_time_and_ids_survive(world):
    uow, ids = world
    say(uow, ids, "Porto", 100)
    say(uow, ids, "Lisbon", 200)
    rederive(uow, [(ids["Priya"], "lives_in")], frozenset({"lives_in"}))
    lisbon_id = relationship_id(uow, ids["Priya"], ids["Lisbon"])
    say(uow, ids, "Madrid", 150)  # an exchange from between the two, imported now
    rederive(uow, [(ids["Priya"], "lives_in")], frozenset({"lives_in"}))
    assert held(uow, ids["Priya"], "lives_in") == [
        (ids["Porto"], 100, 150),
        (ids["Madrid"], 150, 200),
        (ids["Lisbon"], 200, None),
    ]
    # A client's relationship id still names it.
    assert relationship_id(uow, ids["Priya"], ids["Lisbon"]) == lisbon_id


def test_a_label_not_single_valued_keeps_every_value_until_each_is_ended(world):
    uow, ids = world
    say(uow, ids, "Porto", 100)
    say(uow, ids, "Lisbon", 200)
    say(uow, ids, "Porto", 300, END)
    say(uow, ids, "Madrid", 250, END)  # ends nothing: Madrid never held
    rederive(uow, [(ids["Priya"], "lives_in")], frozenset())
    assert held(uow, ids["Priya"], "lives_in") == [
        (ids["Porto"], 100, 300),
        (ids["Lisbon"], 200, None),
    ]


def test_an_entity_related_to_itself_is_no_fact(world):
    uow, ids = world
    uow.graph.add_evidence(ids["Porto"], ids["Porto"], "located_in", ASSERT, 100)
    rederive(uow, [(ids["Porto"], "located_in")], frozenset({"located_in"}))
    assert held(uow, ids["Porto"], "located_in") == []
