"""A point copied by the embedded index's compaction (vectors/edge.py's
``_as_point``), from the record a shard's scroll returns, without a shard: its
id as an integer, its vector (the unnamed one of named vectors, else the
first), and its payload whole (none: an empty one).

A compaction over real shards (no byte of a deleted point left, writes during
the copy kept, a crash during the swap) is
tests/integration/vectors/test_edge_compaction.py's."""

from __future__ import annotations

from types import SimpleNamespace

from nexus_grpc.vectors.edge import _as_point


def record(id: object, vector: object, payload: object) -> SimpleNamespace:
    return SimpleNamespace(id=id, vector=vector, payload=payload)


def test_a_record_becomes_the_same_point() -> None:
    payload = {"user": 9, "kind": "fact", "pinned": True}
    point = _as_point(record(7, [0.25, -0.5], payload))
    assert (point.id, point.vector, point.payload) == (7, [0.25, -0.5], payload)


def test_the_id_is_an_integer_and_no_payload_is_an_empty_one() -> None:
    point = _as_point(record("12", (1.0, 2.0), None))
    assert (point.id, point.vector, point.payload) == (12, [1.0, 2.0], {})


def test_of_named_vectors_the_unnamed_one_is_kept_else_the_first() -> None:
    both = _as_point(record(1, {"title": [9.0, 9.0], "": [1.0, 0.0]}, {}))
    assert both.vector == [1.0, 0.0]
    named = _as_point(record(2, {"title": [0.0, 1.0], "body": [9.0, 9.0]}, {}))
    assert named.vector == [0.0, 1.0]
