"""The one codec between the service's error details and ``google.rpc``.

A refusal's details (``errors.py``: field, quota and precondition
violations, the resource, the reason) travel as ``google.rpc`` messages
packed into a ``google.rpc.Status`` in the ``grpc-status-details-bin``
trailer, grpc's ``examples/python/errors`` way. The server packs them
(``rpc/error_status.py``) and the Python client unpacks them
(``client/base.py``) with the two functions here, so the two sides cannot
drift apart; ``tests/unit/test_errors_details.py`` round-trips every kind.

It imports neither the server's code nor the client's: both import it.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from nexus_grpc.errors import (
    Detail,
    ErrorInfo,
    FieldViolation,
    PreconditionViolation,
    QuotaViolation,
    ResourceInfo,
)

__all__ = ["DETAILS_KEY", "pack", "to_messages", "unpack"]

#: The trailer that carries the packed ``google.rpc.Status``.
DETAILS_KEY = "grpc-status-details-bin"


def to_messages(details: Iterable[Detail]) -> list[Message]:
    """``details`` as ``google.rpc`` messages: the field violations in one
    BadRequest, the quota violations in one QuotaFailure, the precondition
    violations in one PreconditionFailure, then each ResourceInfo and
    ErrorInfo as it is."""
    fields: list[FieldViolation] = []
    quotas: list[QuotaViolation] = []
    preconditions: list[PreconditionViolation] = []
    single: list[Message] = []
    for detail in details:
        if isinstance(detail, FieldViolation):
            fields.append(detail)
        elif isinstance(detail, QuotaViolation):
            quotas.append(detail)
        elif isinstance(detail, PreconditionViolation):
            preconditions.append(detail)
        elif isinstance(detail, ResourceInfo):
            single.append(
                error_details_pb2.ResourceInfo(
                    resource_type=detail.resource_type,
                    resource_name=detail.resource_name,
                    owner=detail.owner,
                    description=detail.description,
                )
            )
        else:
            single.append(
                error_details_pb2.ErrorInfo(
                    reason=detail.reason, domain=detail.domain, metadata=dict(detail.metadata)
                )
            )
    messages: list[Message] = []
    if fields:
        messages.append(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(
                        field=f.field, description=f.description
                    )
                    for f in fields
                ]
            )
        )
    if quotas:
        messages.append(
            error_details_pb2.QuotaFailure(
                violations=[
                    error_details_pb2.QuotaFailure.Violation(
                        subject=q.subject,
                        description=q.description,
                        quota_id=q.quota_id,
                        quota_value=q.quota_value,
                    )
                    for q in quotas
                ]
            )
        )
    if preconditions:
        messages.append(
            error_details_pb2.PreconditionFailure(
                violations=[
                    error_details_pb2.PreconditionFailure.Violation(
                        type=p.type, subject=p.subject, description=p.description
                    )
                    for p in preconditions
                ]
            )
        )
    return messages + single


def pack(code: int, message: str, details: Iterable[Detail]) -> status_pb2.Status:
    """The ``google.rpc.Status`` of a refusal: its code (the number), its
    message and its details."""
    status = status_pb2.Status(code=code, message=message)
    for detail in to_messages(details):
        status.details.add().Pack(detail)
    return status


def unpack(status: status_pb2.Status) -> tuple[Detail, ...]:
    """The details of ``status`` this codec knows (BadRequest, QuotaFailure,
    PreconditionFailure, ResourceInfo, ErrorInfo), in order; others are
    skipped (a client keeps the status itself for them)."""
    out: list[Detail] = []
    for packed in status.details:
        if packed.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            packed.Unpack(bad)
            out.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
        elif packed.Is(error_details_pb2.QuotaFailure.DESCRIPTOR):
            quota = error_details_pb2.QuotaFailure()
            packed.Unpack(quota)
            out.extend(
                QuotaViolation(v.subject, v.description, v.quota_id, v.quota_value)
                for v in quota.violations
            )
        elif packed.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR):
            failure = error_details_pb2.PreconditionFailure()
            packed.Unpack(failure)
            out.extend(
                PreconditionViolation(v.type, v.subject, v.description) for v in failure.violations
            )
        elif packed.Is(error_details_pb2.ResourceInfo.DESCRIPTOR):
            info = error_details_pb2.ResourceInfo()
            packed.Unpack(info)
            out.append(
                ResourceInfo(info.resource_type, info.resource_name, info.owner, info.description)
            )
        elif packed.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            reason = error_details_pb2.ErrorInfo()
            packed.Unpack(reason)
            out.append(ErrorInfo(reason.reason, dict(reason.metadata), reason.domain))
    return tuple(out)
