"""Three small rules of a call's details, as values: the field an
InvalidArgument names is read from its details (none when it carries no field
violation, whatever else it carries), the codec skips a detail it does not know and
keeps the rest in order, and the user-id walk of rpc/auth.py looks into every
item of a repeated message.

The codec's round trip, each error's status code and the trailer are in
tests/unit/test_errors_details.py; the walk over the user-scoped requests in
tests/unit/test_auth_keys.py."""

from __future__ import annotations

from google.protobuf import any_pb2
from google.rpc import error_details_pb2

from nexus_grpc.errors import (
    ErrorInfo,
    InvalidArgument,
    ResourceInfo,
)
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.rpc.auth import request_user_ids
from nexus_grpc.status_details import pack, unpack


def test_an_invalid_argument_names_its_first_field_or_none():
    assert InvalidArgument("bad", field="session.name", fields=["x"]).field == "session.name"
    assert InvalidArgument("one of two", fields=["", "a", "b"]).field == "a"
    reason = ErrorInfo("TOO_MANY", {"limit": "3"})
    assert InvalidArgument("bad", details=(reason,)).field is None


def test_a_detail_the_codec_does_not_know_is_skipped_and_the_rest_kept_in_order():
    status = pack(
        5,
        "no session 9",
        [ResourceInfo("session", "9"), ErrorInfo("GONE", {"id": "9"}, "nexus")],
    )
    debug = any_pb2.Any()
    debug.Pack(error_details_pb2.DebugInfo(detail="a stack"))
    status.details.insert(1, debug)
    assert unpack(status) == (
        ResourceInfo("session", "9"),
        ErrorInfo("GONE", {"id": "9"}, "nexus"),
    )


def test_every_item_of_a_repeated_message_is_searched_for_user_ids():
    listed = memory_pb2.ListSessionsResponse(
        sessions=[
            memory_pb2.Session(user_id="alice"),
            memory_pb2.Session(),
            memory_pb2.Session(user_id="bob"),
        ]
    )
    assert list(request_user_ids(listed)) == ["alice", "bob"]
