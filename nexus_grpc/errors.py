"""Domain exceptions, one per status a client can act on, and the details a
client needs to act on one without reading its message.

Plain exceptions, with no gRPC in them: domain code raises them, and the
interceptors map each class to its status code and its details to
``google.rpc`` error details in the ``grpc-status-details-bin`` trailer
(rpc/error_status.py), for unary and streaming calls alike, so servicers never
build statuses by hand.  Anything else becomes INTERNAL with a generic message.

The details mirror ``google/rpc/error_details.proto``: a ``FieldViolation``
goes out in a ``BadRequest``, a ``QuotaViolation`` in a ``QuotaFailure``, a
``PreconditionViolation`` in a ``PreconditionFailure``, and a ``ResourceInfo``
and an ``ErrorInfo`` as themselves.  The Python client (``nexus_grpc.client``)
decodes them back into these same classes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FieldViolation:
    """A request field that is wrong (``google.rpc.BadRequest.FieldViolation``).

    ``field`` is the field's path in the request, in the proto's names and
    dotted for nested messages (``memory.title``, ``scope.user_id``,
    ``page_size``); ``description`` says what is wrong with it."""

    field: str
    description: str


@dataclass(frozen=True)
class QuotaViolation:
    """A limit a call met (``google.rpc.QuotaFailure.Violation``).

    ``subject`` is whose limit it is (``server``, ``api_key:NAME``,
    ``project:5``); ``quota_id`` names the limit, as its flag does where it has
    one (``max-concurrent-rpcs-per-key``); ``quota_value`` is the limit."""

    subject: str
    description: str
    quota_id: str = ""
    quota_value: int = 0


@dataclass(frozen=True)
class PreconditionViolation:
    """A state the call needs and does not find
    (``google.rpc.PreconditionFailure.Violation``)."""

    type: str
    subject: str
    description: str


@dataclass(frozen=True)
class ResourceInfo:
    """The resource a call is about (``google.rpc.ResourceInfo``): for
    NOT_FOUND, the one that does not exist. ``resource_type`` is the noun the
    API uses (``session``, ``memory``, ``entity``); ``resource_name`` its id."""

    resource_type: str
    resource_name: str
    owner: str = ""
    description: str = ""


#: ``ErrorInfo.domain`` for every reason this service gives.
ERROR_DOMAIN = "nexus-grpc"


@dataclass(frozen=True)
class ErrorInfo:
    """Why, as a constant a program can switch on (``google.rpc.ErrorInfo``):
    ``reason`` is UPPER_SNAKE_CASE and stable; ``metadata`` holds its facts."""

    reason: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    domain: str = ERROR_DOMAIN


Detail = FieldViolation | QuotaViolation | PreconditionViolation | ResourceInfo | ErrorInfo


class NexusError(Exception):
    """A refusal with a message a person reads and ``details`` a program reads."""

    def __init__(self, message: str, *, details: Iterable[Detail] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.details: tuple[Detail, ...] = tuple(details)

    def reworded(self, message: str) -> NexusError:
        """The same refusal (class and details) with another message."""
        again = NexusError.__new__(type(self))
        NexusError.__init__(again, message, details=self.details)
        return again

    def __reduce__(self) -> tuple[object, ...]:
        # The keyword-only details would be lost by Exception's pickling.
        return (_rebuild, (type(self), self.message, self.details))


def _rebuild(cls: type[NexusError], message: str, details: tuple[Detail, ...]) -> NexusError:
    error = NexusError.__new__(cls)
    NexusError.__init__(error, message, details=details)
    return error


class InvalidArgument(NexusError):
    """A request the service will not take as it is. ``field``: the request
    field at fault, sent as a ``BadRequest`` field violation whose description
    is the message; ``fields``: several at fault together (one of two is
    required, two that exclude each other), each with the message."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        fields: Iterable[str] = (),
        details: Iterable[Detail] = (),
    ) -> None:
        named = ([field] if field else []) + [f for f in fields if f]
        violations = tuple(FieldViolation(f, message) for f in named)
        super().__init__(message, details=(*violations, *details))

    @property
    def field(self) -> str | None:
        """The first violated field's path, or None when the message names none."""
        for detail in self.details:
            if isinstance(detail, FieldViolation):
                return detail.field
        return None


class NotFound(NexusError):
    """A resource the call names does not exist (or is not the caller's to
    see: both read the same). Whoever raises it names the resource
    (``resource_type`` and ``resource_name``): it goes out as a
    ``ResourceInfo``, never read back out of the message."""

    def __init__(
        self,
        message: str,
        *,
        resource_type: str,
        resource_name: str | int,
        details: Iterable[Detail] = (),
    ) -> None:
        info = ResourceInfo(resource_type, str(resource_name), description=message)
        super().__init__(message, details=(info, *details))

    @property
    def resource(self) -> ResourceInfo | None:
        for detail in self.details:
            if isinstance(detail, ResourceInfo):
                return detail
        return None


class AlreadyExists(NexusError):
    pass


class FailedPrecondition(NexusError):
    pass


class Unavailable(NexusError):
    pass


class Unauthenticated(NexusError):
    pass


class PermissionDenied(NexusError):
    pass


class ResourceExhausted(NexusError):
    pass


class DeadlineExceeded(NexusError):
    pass


class DependencyError(Exception):
    """The one root of what the adapters raise when the service's own
    dependencies fail: the store (``StoreUnavailable``), the vector index
    (``VectorIndexUnavailable``...), the embedder, the LLM (``LLMError``) and
    the reranker (``RerankError``). Not a refusal of the caller's request
    (those are ``NexusError``): the domain decides what each means for the
    call (wait, retry, answer degraded, UNAVAILABLE). Callers catch
    ``DependencyError`` and read what kind of failure it is from the two
    attributes below, never from a list of its subclasses."""

    #: Whether the same call may succeed when made again later: an outage, a
    #: timeout, a garbled answer. False where the identical request would fail
    #: identically (an answer cut off at its limit, an input too long, a rule of
    #: the schema broken, an index another process holds): a job gives up at once.
    retryable: bool = True
    #: Whether nothing answered at all (refused, not running, not configured):
    #: background work waits for it without spending an attempt, so an outage
    #: never exhausts a backlog; it drains when the dependency is back.
    unreachable: bool = False
