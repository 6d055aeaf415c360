"""How a refusal goes on the wire: its status code, its message, and its
details as a ``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer.

grpc's ``examples/python/errors`` way: the details are packed into
``google.rpc`` messages (``error_details_pb2``), wrapped in a
``google.rpc.Status`` whose code and message are the call's, and turned into
trailing metadata by ``grpc_status.rpc_status.to_status``.  A client that
knows nothing of them still gets the code and the message.

It sits beside rpc/interception.py because both interceptors use it: the
error mapping of api/interceptors.py, and the refusals of auth.py, which lies
below api.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import grpc
from grpc_status import rpc_status

from nexus_grpc.core.redact import scrub
from nexus_grpc.errors import (
    AlreadyExists,
    DeadlineExceeded,
    Detail,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NexusError,
    NotFound,
    PermissionDenied,
    PreconditionViolation,
    QuotaViolation,
    ResourceExhausted,
    ResourceInfo,
    Unauthenticated,
    Unavailable,
)
from nexus_grpc.status_details import DETAILS_KEY, pack

log = logging.getLogger(__name__)

STATUS_CODES: dict[type[NexusError], grpc.StatusCode] = {
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
}

#: The most the packed details may take. Peers cap a response's trailers
#: (grpc: 16 KiB by default, the status message included), and binary metadata
#: travels base64-encoded: past this, the details are left off and the code
#: and message still go out, rather than the whole status being lost.
MAX_DETAILS_BYTES = 8 * 1024
#: A description past this is cut: it repeats the message, which says it all.
MAX_DESCRIPTION_CHARS = 1000


def status_code(error: NexusError) -> grpc.StatusCode:
    """The status code of ``error``'s class (INTERNAL for a bare NexusError)."""
    for cls in type(error).__mro__:
        code = STATUS_CODES.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


def _cut(text: str) -> str:
    # A dependency's error may quote its URL: never with a credential.
    text = scrub(text)
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[:MAX_DESCRIPTION_CHARS] + "..."


def _shown(detail: Detail) -> Detail:
    """A detail as it may leave the server: its free text scrubbed and cut."""
    if isinstance(detail, FieldViolation | QuotaViolation | PreconditionViolation | ResourceInfo):
        return dataclasses.replace(detail, description=_cut(detail.description))
    return dataclasses.replace(detail, metadata={k: _cut(v) for k, v in detail.metadata.items()})


def rich_status(code: grpc.StatusCode, message: str, details: Sequence[Detail]) -> grpc.Status:
    """The grpc.Status that carries ``details``: its trailing metadata is the
    ``grpc-status-details-bin`` entry. The details are left off (with a log
    line) when they would not fit in MAX_DETAILS_BYTES."""
    status = pack(code.value[0], message, [_shown(d) for d in details])
    if status.ByteSize() > MAX_DETAILS_BYTES:
        log.warning(
            "%s: %d bytes of error details left off (the limit is %d)",
            code.name,
            status.ByteSize(),
            MAX_DETAILS_BYTES,
        )
        del status.details[:]
    return rpc_status.to_status(status)


async def abort(
    context: grpc.aio.ServicerContext,
    code: grpc.StatusCode,
    message: str,
    details: Sequence[Detail] = (),
) -> None:
    """Ends the call (raises, as ``context.abort`` does) with ``code``,
    ``message`` and ``details``, keeping the trailing metadata already set
    (the x-request-id): ``abort`` with trailing metadata replaces what was set
    before."""
    if not details:
        await context.abort(code, message)
        return
    status = rich_status(code, message, details)
    kept: tuple[Any, ...] = tuple(
        (key, value) for key, value in (context.trailing_metadata() or ()) if key != DETAILS_KEY
    )
    await context.abort(status.code, status.details, (*kept, *status.trailing_metadata))


async def abort_with_error(context: grpc.aio.ServicerContext, error: NexusError) -> None:
    """Ends the call (raises) with ``error``'s status code, message and details."""
    # A dependency's error may quote its URL: never with a credential.
    await abort(context, status_code(error), scrub(error.message), error.details)
