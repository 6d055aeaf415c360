"""Guards found by a mutation audit of the unit tier: the cut of a
detail's description (rpc/error_status.py) held at its boundary.

The rest of the error details are tests/unit/test_errors_details.py's."""

from __future__ import annotations

import grpc
from google.rpc import status_pb2

from nexus_grpc.errors import FieldViolation
from nexus_grpc.rpc.error_status import MAX_DESCRIPTION_CHARS, rich_status
from nexus_grpc.status_details import unpack


def _description_sent(text: str) -> str:
    status = rich_status(grpc.StatusCode.INVALID_ARGUMENT, "m", [FieldViolation("q", text)])
    [(_, value)] = status.trailing_metadata
    [violation] = unpack(status_pb2.Status.FromString(value))
    return str(violation.description)


def test_a_description_of_the_limit_goes_whole_and_one_character_more_is_cut():
    assert _description_sent("x" * MAX_DESCRIPTION_CHARS) == "x" * MAX_DESCRIPTION_CHARS
    cut = _description_sent("x" * (MAX_DESCRIPTION_CHARS + 1))
    assert cut == "x" * MAX_DESCRIPTION_CHARS + "..."
