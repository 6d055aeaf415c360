"""A refusal's details as values (errors.py, rpc/error_status.py,
status_details.py, the client's typed errors): the codec both sides share,
the status code of each domain error, the trailer that carries the details,
what a reworded or pickled error keeps. Called directly, with the recording
context of tests/unit/grpc_contexts.py; no server.

Moved from tests/e2e/api/test_error_details.py, which keeps one call per
kind of detail over the wire (what grpcio-status and the NexusClient read
off a real trailer).
"""

from __future__ import annotations

import pickle

import grpc
import grpc.aio
import pytest
from google.rpc import status_pb2

from nexus_grpc.client import (
    FieldViolation,
    NexusClientError,
    NexusInvalidArgument,
    ResourceInfo,
)
from nexus_grpc.errors import (
    AlreadyExists,
    DeadlineExceeded,
    ErrorInfo,
    FailedPrecondition,
    InvalidArgument,
    NexusError,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from nexus_grpc.rpc.error_status import (
    MAX_DESCRIPTION_CHARS,
    MAX_DETAILS_BYTES,
    abort,
    abort_with_error,
    rich_status,
    status_code,
)
from nexus_grpc.status_details import DETAILS_KEY, unpack
from tests.unit.grpc_contexts import Aborted, AbortingContext


def test_a_client_error_made_from_a_code_is_the_typed_one_and_pickles_with_its_details():
    err = NexusClientError(
        grpc.StatusCode.INVALID_ARGUMENT,
        "page_size must not be negative, got -1",
        "rid-1",
        (FieldViolation("page_size", "page_size must not be negative, got -1"),),
    )
    assert type(err) is NexusInvalidArgument
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is NexusInvalidArgument
    assert (again.code, again.message, again.request_id) == (err.code, err.message, "rid-1")
    assert again.field_violations == err.field_violations
    # A code without a subclass stays the base class.
    assert type(NexusClientError(grpc.StatusCode.DATA_LOSS, "x")) is NexusClientError


def test_domain_errors_keep_their_details_when_reworded_or_pickled():
    err = InvalidArgument("memory.title is required", field="memory.title")
    reworded = err.reworded("record 3 (memory): memory.title is required")
    assert type(reworded) is InvalidArgument
    assert reworded.field == "memory.title"
    assert reworded.message.startswith("record 3")
    assert pickle.loads(pickle.dumps(err)).details == err.details
    # The resource is named by whoever raises, never read out of the message.
    missing = NotFound("summary 12 does not exist", resource_type="summary", resource_name=12)
    assert missing.resource == ResourceInfo("summary", "12", description=missing.message)
    with pytest.raises(TypeError):
        NotFound("summary 12 does not exist")  # type: ignore[call-arg]


def test_details_too_big_for_a_trailer_are_left_off_and_the_status_still_goes():
    many = [FieldViolation(f"field_{i}", "x" * 900) for i in range(20)]
    status = rich_status(grpc.StatusCode.INVALID_ARGUMENT, "too much", many)
    [(key, value)] = status.trailing_metadata
    decoded = status_pb2.Status.FromString(value)
    assert (decoded.code, decoded.message) == (
        grpc.StatusCode.INVALID_ARGUMENT.value[0],
        "too much",
    )
    assert len(decoded.details) == 0
    few = rich_status(grpc.StatusCode.INVALID_ARGUMENT, "fine", many[:2])
    assert len(status_pb2.Status.FromString(few.trailing_metadata[0][1]).details) == 1
    assert len(value) <= MAX_DETAILS_BYTES


def test_one_codec_packs_and_unpacks_every_kind_of_detail():
    """The server packs and the client unpacks with status_details: every kind
    of detail comes back as it went, in the codec's order."""
    from nexus_grpc.errors import ErrorInfo, PreconditionViolation, QuotaViolation
    from nexus_grpc.status_details import pack, unpack

    sent = (
        FieldViolation("memory.title", "memory.title is required"),
        FieldViolation("scope.user_id", "not yours"),
        QuotaViolation("tenant:t", "at most 4", "max-concurrent-rpcs-per-tenant", 4),
        PreconditionViolation("STATE", "episode 3", "still pending"),
        ResourceInfo("session", "5", description="session 5 does not exist"),
        ErrorInfo("SESSION_USER_NOT_PERMITTED", {"session_id": "5", "user_id": "alice"}),
    )
    status = pack(grpc.StatusCode.PERMISSION_DENIED.value[0], "no", sent)
    assert status.code == grpc.StatusCode.PERMISSION_DENIED.value[0] and status.message == "no"
    assert unpack(status) == sent


# --- the status a domain error goes out with ------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (InvalidArgument("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (NotFound("x", resource_type="session", resource_name=1), grpc.StatusCode.NOT_FOUND),
        (AlreadyExists("x"), grpc.StatusCode.ALREADY_EXISTS),
        (FailedPrecondition("x"), grpc.StatusCode.FAILED_PRECONDITION),
        (Unavailable("x"), grpc.StatusCode.UNAVAILABLE),
        (Unauthenticated("x"), grpc.StatusCode.UNAUTHENTICATED),
        (PermissionDenied("x"), grpc.StatusCode.PERMISSION_DENIED),
        (ResourceExhausted("x"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (DeadlineExceeded("x"), grpc.StatusCode.DEADLINE_EXCEEDED),
        (NexusError("x"), grpc.StatusCode.INTERNAL),
    ],
)
def test_each_domain_error_has_its_status_code(error, code):
    assert status_code(error) is code


async def test_a_refusal_with_details_keeps_the_x_request_id_beside_them():
    context = AbortingContext((("x-request-id", "rid-7"),))
    violation = FieldViolation("memory.title", "memory.title is required and must not be blank")
    with pytest.raises(Aborted):
        await abort(context, grpc.StatusCode.INVALID_ARGUMENT, violation.description, [violation])
    code, message, trailers = context.aborted
    assert (code, message) == (grpc.StatusCode.INVALID_ARGUMENT, violation.description)
    assert trailers[0] == ("x-request-id", "rid-7")
    [packed] = [v for k, v in trailers if k == DETAILS_KEY]
    status = status_pb2.Status.FromString(packed)
    assert (status.code, status.message) == (grpc.StatusCode.INVALID_ARGUMENT.value[0], message)
    assert unpack(status) == (violation,)


async def test_a_refusal_without_details_is_the_code_and_message_alone():
    context = AbortingContext((("x-request-id", "rid-8"),))
    with pytest.raises(Aborted):
        await abort(context, grpc.StatusCode.NOT_FOUND, "gone")
    assert context.aborted == (grpc.StatusCode.NOT_FOUND, "gone", ())


async def test_a_domain_error_goes_out_with_its_code_message_and_resource():
    context = AbortingContext()
    error = NotFound("session 98765 does not exist", resource_type="session", resource_name=98765)
    with pytest.raises(Aborted):
        await abort_with_error(context, error)
    code, message, trailers = context.aborted
    assert (code, message) == (grpc.StatusCode.NOT_FOUND, "session 98765 does not exist")
    [packed] = [v for k, v in trailers if k == DETAILS_KEY]
    assert unpack(status_pb2.Status.FromString(packed)) == (
        ResourceInfo("session", "98765", description="session 98765 does not exist"),
    )


def test_a_detail_too_long_to_repeat_is_cut():
    long = FieldViolation("q", "x" * (MAX_DESCRIPTION_CHARS + 50))
    status = rich_status(grpc.StatusCode.INVALID_ARGUMENT, "long", [long])
    [(_, value)] = status.trailing_metadata
    [violation] = unpack(status_pb2.Status.FromString(value))
    assert violation.description == "x" * MAX_DESCRIPTION_CHARS + "..."


def test_error_info_metadata_goes_out_as_given():
    status = rich_status(
        grpc.StatusCode.PERMISSION_DENIED, "no", [ErrorInfo("USER_NOT_PERMITTED", {"a": "b"})]
    )
    [(_, value)] = status.trailing_metadata
    assert unpack(status_pb2.Status.FromString(value)) == (
        ErrorInfo("USER_NOT_PERMITTED", {"a": "b"}),
    )
