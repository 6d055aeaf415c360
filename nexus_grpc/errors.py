"""Domain exceptions, one per status a client can act on.

Domain code raises these; one interceptor (api/interceptors.py) maps them to
gRPC status codes for unary and streaming calls alike, so servicers never
build statuses by hand.  Anything else becomes INTERNAL with a generic message.
"""

from __future__ import annotations

import grpc


class NexusError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(NexusError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(NexusError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(NexusError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(NexusError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(NexusError):
    code = grpc.StatusCode.UNAVAILABLE


class Unauthenticated(NexusError):
    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(NexusError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(NexusError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class DeadlineExceeded(NexusError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED
