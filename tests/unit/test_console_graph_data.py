"""The graph page's data (console/page_data.py), as pure functions of the
server's answers: each entity as it stood on a date (not there before its
first fact, told apart when no fact of it held then), the slider's range
over the facts' own span, the layout's entities, the same every time, and
the cap on what a page draws."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.console.page_data import (
    MAX_NODES,
    capped_graph,
    fact_times,
    first_fact_times,
    layout_graph,
    slider_range,
)
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2

MARCH, JUNE = 1_709_251_200, 1_717_200_000  # 2024-03-01, 2024-06-01


def entity(i: int, name: str, kind: str = "place") -> graph_pb2.Entity:
    return graph_pb2.Entity(id=i, name=name, type=kind)


def fact(i: int, a: int, b: int, began: int, ended: int = 0) -> graph_pb2.Relationship:
    edge = graph_pb2.Relationship(id=i, from_id=a, to_id=b, label="lives_in")
    edge.valid_time.CopyFrom(Timestamp(seconds=began))
    if ended:
        edge.invalid_time.CopyFrom(Timestamp(seconds=ended))
    return edge


ALICE, LISBON, PORTO, MIST = (
    entity(1, "Alice", "person"),
    entity(2, "Lisbon"),
    entity(3, "Porto"),
    entity(4, "Mist"),
)
HISTORY = [fact(10, 1, 2, MARCH, JUNE), fact(11, 1, 3, JUNE)]


def test_an_entity_is_not_there_before_its_first_fact():
    firsts = first_fact_times(HISTORY)
    assert firsts == {
        1: "2024-03-01T00:00:00Z",
        2: "2024-03-01T00:00:00Z",
        3: "2024-06-01T00:00:00Z",
    }
    # As of 15 March: Alice lived in Lisbon; Porto, a seed drawn with no
    # fact, was not mentioned until June; Mist has no fact at all.
    march = capped_graph([ALICE, LISBON, PORTO, MIST], [HISTORY[0]], [1, 2, 3, 4],
                         known_at="2024-03-15T00:00:00Z", first_facts=firsts)  # fmt: skip
    assert [(n["name"], n["held"]) for n in march["nodes"]] == [
        ("Alice", True),
        ("Lisbon", True),
        ("Mist", False),
    ]
    assert march["nodes"][0]["first_fact"] == "2024-03-01T00:00:00Z"


def test_now_an_entity_whose_facts_ended_is_told_apart():
    now = capped_graph([ALICE, LISBON, PORTO], [HISTORY[1]], [1, 2, 3],
                       first_facts=first_fact_times(HISTORY))  # fmt: skip
    assert {n["name"]: n["held"] for n in now["nodes"]} == {
        "Alice": True,
        "Porto": True,
        "Lisbon": False,
    }


def test_the_slider_spans_the_facts_not_the_years_since():
    times = fact_times(HISTORY)
    assert times == ["2024-03-01T00:00:00Z", "2024-06-01T00:00:00Z"]
    slider = slider_range(times, "2026-12-07T12:00:00Z")
    # 92 days of facts, 5% of them on either side; the right end is now.
    assert slider["min"] == "2024-02-25T09:36:00Z"
    assert slider["max"] == "2024-06-05T14:24:00Z"
    assert slider["now"] == "2026-12-07T12:00:00Z" and slider["marks"] == times
    # One date: a day on either side; recent facts: never past now.
    one = slider_range(["2026-12-07T00:00:00Z"], "2026-12-07T12:00:00Z")
    assert (one["min"], one["max"]) == ("2026-12-06T00:00:00Z", "2026-12-07T12:00:00Z")
    assert slider_range([], "2026-12-07T12:00:00Z") is None  # nothing to slide over


def test_the_layout_holds_every_entity_ever_drawn_in_a_fixed_order():
    shuffled = [PORTO, MIST, LISBON, ALICE]
    laid = layout_graph(shuffled, list(reversed(HISTORY)), [1])
    assert laid == layout_graph([ALICE, LISBON, PORTO, MIST], HISTORY, [1])
    assert laid["nodes"][0] == [1, 0, "Alice", "person"]
    assert sorted(n[2] for n in laid["nodes"]) == ["Alice", "Lisbon", "Mist", "Porto"]
    assert laid["edges"] == [[1, 2], [1, 3]]


def test_a_large_graph_is_capped_with_the_entity_asked_about_first():
    """A hub with more neighbours than a page draws (the whole-console test's
    world): MAX_NODES of them, the hub first, no edge to one left out."""
    spokes = MAX_NODES + 20
    hub = entity(1, "Hub", "concept")
    nodes = [hub] + [entity(100 + n, f"Spoke {n:03d}", "concept") for n in range(spokes)]
    links = [
        graph_pb2.Relationship(id=1000 + n, from_id=1, to_id=100 + n, label="links")
        for n in range(spokes)
    ]
    view = capped_graph(nodes, links, [1])
    assert view["capped"] and len(view["nodes"]) == MAX_NODES == view["max_nodes"]
    assert view["total_nodes"] == spokes + 1 and view["total_edges"] == spokes
    assert view["nodes"][0]["name"] == "Hub"  # the entity asked about is always drawn
    kept = {n["id"] for n in view["nodes"]}
    assert all(e["from_id"] in kept and e["to_id"] in kept for e in view["edges"])
    assert len(view["edges"]) == MAX_NODES - 1
    # Ties of degree go by id: the spokes drawn are the first ones.
    assert [n["id"] for n in view["nodes"][1:3]] == [100, 101]
    small = capped_graph(nodes[:3], links[:2], [1])
    assert not small["capped"] and small["total_nodes"] == len(small["nodes"]) == 3
