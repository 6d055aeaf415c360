"""A person's pages in the console (console/people.py), with no server: the
forget form's typed id, the download's file name, and an erasure's progress."""

from __future__ import annotations

import pytest

from nexus_grpc.console.params import BadRequest
from nexus_grpc.console.people import check_typed, erasure_view, export_name
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2


@pytest.mark.parametrize("typed", ["", "Alice", "alice ", " alice", "alic", "alice\n", "аlice"])
def test_the_forget_form_goes_on_only_with_the_id_typed_exactly(typed):
    with pytest.raises(BadRequest) as refused:
        check_typed({"user_id": "alice", "typed_user_id": typed}, "alice")
    assert refused.value.field == "typed_user_id"
    assert "nothing was forgotten" in refused.value.message


@pytest.mark.parametrize("typed", ["", "Dave", "dave ", " dave", "dav"])
def test_a_typed_id_not_exactly_the_users_says_to_type_it_exactly(typed):
    """The values the whole-console test once posted, one request each: the
    form says how to go on, naming the id to type."""
    with pytest.raises(BadRequest) as refused:
        check_typed({"user_id": "dave", "typed_user_id": typed}, "dave")
    assert refused.value.field == "typed_user_id"
    assert "type the user id exactly as shown (dave)" in refused.value.message


def test_the_id_typed_exactly_is_enough():
    check_typed({"typed_user_id": "ali ce/2"}, "ali ce/2")


@pytest.mark.parametrize(
    ("user_id", "project_id", "name"),
    [
        ("alice", 0, "export-user-alice.jsonl"),
        ("alice", 7, "export-user-alice-project-7.jsonl"),
        ('a"b\r\nSet-Cookie: x=1', 0, "export-user-a_b__Set-Cookie__x_1.jsonl"),
        ("../../etc/passwd", 0, "export-user-.._.._etc_passwd.jsonl"),
        ("zoë", 0, "export-user-zo_.jsonl"),
    ],
)
def test_the_downloads_name_keeps_to_safe_characters(user_id, project_id, name):
    assert export_name(user_id, project_id) == name


def _erasure(state, done, planned) -> memory_pb2.Erasure:
    return memory_pb2.Erasure(
        id=1, kind=memory_pb2.ERASURE_KIND_USER, state=state, phase="episodes",
        counts=memory_pb2.ErasureCounts(**done), planned=memory_pb2.ErasureCounts(**planned),
    )  # fmt: skip


def test_an_erasures_progress_is_what_went_against_what_it_found():
    running = memory_pb2.ERASURE_STATE_RUNNING
    view = erasure_view(
        _erasure(
            running, {"sessions": 1, "episodes": 5}, {"sessions": 2, "episodes": 6, "memories": 2}
        )
    )
    assert view["percent"] == 60 and not view["finished"] and view["state"] == "running"
    assert [(p["kind"], p["done"], p["planned"]) for p in view["progress"]] == [
        ("sessions", 1, 2), ("episodes", 5, 6), ("memories", 0, 2)
    ]  # fmt: skip
    # Rows written for the user while it ran count, but never past the whole.
    over = erasure_view(_erasure(running, {"episodes": 50}, {"episodes": 10, "memories": 10}))
    assert over["percent"] == 50
    done = erasure_view(_erasure(memory_pb2.ERASURE_STATE_DONE, {}, {}))
    assert done["finished"] and done["percent"] == 100
    assert [r["kind"] for r in done["receipt"]][:3] == ["sessions", "episodes", "memories"]
