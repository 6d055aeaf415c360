"""The runtime under the generated ``nexus_grpc.client``: errors, streams, calls.

``proto/gen_client.py`` writes ``nexus_grpc/client/__init__.py`` from the proto
descriptors: one typed method per RPC on ``NexusClient``, a subclass of
``ClientBase`` here.  The channel itself comes from ``nexus_grpc.client.connection``.

``NexusClient`` wraps the generated stubs of ``nexus.memory.v1.MemoryService``,
``nexus.graph.v1.GraphService``, ``nexus.summary.v1.SummaryService`` and
``grpc.health.v1.Health`` with one snake_case method per RPC::

    async with NexusClient("127.0.0.1:50051", api_key="secret") as client:
        session = await client.create_session(session=memory_pb2.Session(name="demo"))
        episode = await client.create_episode(session_id=session.id, user_message="hi")
        async for hit in client.search_episodes(query="hi", session_id=session.id):
            print(hit.score, hit.snippet)

Every method takes either a request message or the request's fields as typed keyword
arguments (``create_episode(session_id=1, user_message="hi")`` builds
``CreateEpisodeRequest(session_id=1, user_message="hi")``), plus optional per-call
``timeout=`` (seconds; ``None`` for no deadline) and ``call_metadata=`` (gRPC
metadata: a sequence of ``(key, value)`` pairs or ``grpc.aio.Metadata``).  A
request field called ``metadata`` (``CreateEpisodeRequest.metadata``) is only
ever that field.  ``metadata=`` as call metadata, this module's first spelling,
still works with a ``DeprecationWarning`` (on a method whose request has a
``metadata`` field, only for a sequence of pairs: a mapping or ``Struct`` is
the field).  Enum fields take labels too (``tier="LONGTERM"``; client/enums.py).

Unary methods return the response as a ``MessageView`` (client/views.py: enum
fields read as enum members; the call's trailers in ``trailers`` and
``empty_reason``).  Server-streaming methods return a ``ServerStream``: an
async iterator of messages (views where they hold enums) that starts the call
on first use and can be cancelled (``stream.cancel()`` or ``async with
stream:``); once it has ended, ``empty_reason``, ``degraded_reason``,
``selection_method`` and ``trailers`` say what the server said beside it.

Every failed RPC raises ``NexusClientError`` carrying the status code, the
status message and the server's ``x-request-id`` when it sent one; its class
says the status (``NexusInvalidArgument``, ``NexusNotFound``,
``NexusResourceExhausted``...: all subclasses of ``NexusClientError``), and
it carries the server's ``google.rpc`` error details, decoded: the fields a
refusal was about (``field_violations``), the limit it met
(``quota_violations``), the resource that does not exist (``resource_info``)
and the machine-readable reason (``error_info``)::

    try:
        await client.create_memory(memory=memory_pb2.Memory(kind=..., title=""))
    except NexusInvalidArgument as exc:
        print([v.field for v in exc.field_violations])  # ['memory.title']

Calls that are safe to repeat are retried by gRPC itself on UNAVAILABLE and
RESOURCE_EXHAUSTED (see ``nexus_grpc.client.connection``); a create whose request has a
``request_id`` gets a fresh one when the caller leaves it empty, so that a retry
the server already executed returns the first result instead of a duplicate.
"""

# The ``timeout`` parameters are gRPC deadlines handed to the call, not asyncio timeouts.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping, Sequence
from types import EllipsisType, TracebackType
from typing import Any, Generic, TypeAlias, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import DecodeError, Message
from google.protobuf.struct_pb2 import Struct
from google.rpc import status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from nexus_grpc.client import views
from nexus_grpc.client.connection import (
    DEFAULT_RETRY,
    REQUEST_ID_FIELD,
    SERVICES,
    RetryPolicy,
    bearer_metadata,
    open_channel,
)
from nexus_grpc.errors import (
    Detail,
    ErrorInfo,
    FieldViolation,
    PreconditionViolation,
    QuotaViolation,
    ResourceInfo,
)
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2_grpc as summary_grpc
from nexus_grpc.runtime import tracing
from nexus_grpc.status_details import unpack

__all__ = [
    "DEFAULT",
    "RPCS",
    "CallMetadata",
    "ClientBase",
    "ErrorInfo",
    "FieldViolation",
    "MetadataArg",
    "NexusAlreadyExists",
    "NexusCancelled",
    "NexusClientError",
    "NexusDeadlineExceeded",
    "NexusFailedPrecondition",
    "NexusInternal",
    "NexusInvalidArgument",
    "NexusNotFound",
    "NexusPermissionDenied",
    "NexusResourceExhausted",
    "NexusUnauthenticated",
    "NexusUnavailable",
    "NexusUnimplemented",
    "PreconditionViolation",
    "QuotaViolation",
    "ResourceInfo",
    "RetryPolicy",
    "ServerStream",
    "Timeout",
]

T = TypeVar("T", bound=Message)
_Self = TypeVar("_Self", bound="ClientBase")

#: Sentinel for "use the client's default timeout".
DEFAULT: EllipsisType = ...
Timeout: TypeAlias = float | None | EllipsisType
#: gRPC call metadata: ``(key, value)`` pairs or ``grpc.aio.Metadata``.
CallMetadata: TypeAlias = Sequence[tuple[str, str | bytes]] | grpc.aio.Metadata | None
#: What ``metadata=`` took before ``call_metadata=``: call metadata, or, where the
#: request has a ``metadata`` field, that field (a mapping or ``Struct``).
MetadataArg: TypeAlias = CallMetadata | Mapping[str, Any] | Struct

REQUEST_ID_KEY = "x-request-id"

# Streams that stay open by design: the client's default deadline does not apply.
_LONG_LIVED = frozenset({"WatchExtractions"})

_STUBS: dict[str, Callable[[grpc.aio.Channel], Any]] = {
    "MemoryService": memory_grpc.MemoryServiceStub,
    "GraphService": graph_grpc.GraphServiceStub,
    "SummaryService": summary_grpc.SummaryServiceStub,
    "Health": health_pb2_grpc.HealthStub,
}


def _snake(name: str) -> str:
    out: list[str] = []
    for i, ch in enumerate(name):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


#: ``(method_name, service, rpc, server_streaming)`` for every nexus RPC, derived
#: from the service descriptors; each has an explicit ``NexusClient`` method.
RPCS: tuple[tuple[str, str, str, bool], ...] = tuple(
    (_snake(method.name), service, method.name, method.server_streaming)
    for service, descriptor in SERVICES.items()
    for method in descriptor.methods
)


class NexusClientError(Exception):
    """A failed RPC: the gRPC status code, its message, the server's request id
    and the status's error details.

    Constructed with a code (``NexusClientError(grpc.StatusCode.NOT_FOUND,
    ...)``), it is the subclass for that code (``NexusNotFound``), so that
    ``except NexusNotFound`` and ``except NexusClientError`` both catch it."""

    def __new__(cls, code: grpc.StatusCode, *args: Any, **kwargs: Any) -> NexusClientError:
        if cls is NexusClientError:
            cls = _BY_CODE.get(code, cls)
        return super().__new__(cls, code, *args)

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        request_id: str | None = None,
        details: Sequence[Detail] = (),
        status: status_pb2.Status | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.request_id = request_id
        #: The decoded google.rpc details, in the order the server sent them.
        self.details: tuple[Detail, ...] = tuple(details)
        #: The google.rpc.Status of the grpc-status-details-bin trailer, with
        #: any detail this client does not decode; None when none came.
        self.status = status
        text = f"{code.name}: {message}"
        if request_id:
            text += f" (request id {request_id})"
        super().__init__(text)

    @property
    def field_violations(self) -> tuple[FieldViolation, ...]:
        """The request fields the call was refused for (google.rpc.BadRequest)."""
        return tuple(d for d in self.details if isinstance(d, FieldViolation))

    @property
    def quota_violations(self) -> tuple[QuotaViolation, ...]:
        """The limits the call met (google.rpc.QuotaFailure)."""
        return tuple(d for d in self.details if isinstance(d, QuotaViolation))

    @property
    def precondition_violations(self) -> tuple[PreconditionViolation, ...]:
        """The states the call needed (google.rpc.PreconditionFailure)."""
        return tuple(d for d in self.details if isinstance(d, PreconditionViolation))

    @property
    def resource_info(self) -> ResourceInfo | None:
        """The resource the call was about (google.rpc.ResourceInfo), the
        first when several came."""
        return next((d for d in self.details if isinstance(d, ResourceInfo)), None)

    @property
    def error_info(self) -> ErrorInfo | None:
        """The reason, as a constant to switch on (google.rpc.ErrorInfo)."""
        return next((d for d in self.details if isinstance(d, ErrorInfo)), None)

    def __reduce__(self) -> tuple[Any, ...]:
        # The status proto stays behind; the decoded details travel.
        return (type(self), (self.code, self.message, self.request_id, self.details))

    @classmethod
    def from_rpc_error(cls, exc: grpc.aio.AioRpcError) -> NexusClientError:
        request_id: str | None = None
        for metadata in (exc.trailing_metadata(), exc.initial_metadata()):
            if not metadata:
                continue
            for key, value in metadata:
                if key == REQUEST_ID_KEY:
                    request_id = value.decode() if isinstance(value, bytes) else str(value)
                    break
            if request_id:
                break
        status = _rich_status(exc)
        details = unpack(status) if status is not None else ()
        return cls(exc.code(), exc.details() or "", request_id, details, status)


def _text_metadata(metadata: Any) -> dict[str, str]:
    """A call's trailing metadata as text: the last value of each key, binary
    (``-bin``) ones left out."""
    out: dict[str, str] = {}
    for key, value in metadata or ():
        if isinstance(value, str):
            out[key] = value
    return out


def _rich_status(exc: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    """The google.rpc.Status in the call's trailers; None when there is none,
    or when it is malformed or contradicts the call's own status (a proxy
    between may have rewritten one and not the other)."""
    try:
        status: status_pb2.Status | None = rpc_status.from_call(exc)
    except (ValueError, DecodeError):
        return None
    return status


class NexusInvalidArgument(NexusClientError):
    """INVALID_ARGUMENT: ``field_violations`` names the fields to fix."""


class NexusNotFound(NexusClientError):
    """NOT_FOUND: ``resource_info`` names what does not exist."""


class NexusAlreadyExists(NexusClientError):
    """ALREADY_EXISTS: ``resource_info``, where the server sends one, names
    what is already there (a project's name: the project that holds it)."""


class NexusFailedPrecondition(NexusClientError):
    """FAILED_PRECONDITION (the memory cap's carries ``quota_violations``)."""


class NexusResourceExhausted(NexusClientError):
    """RESOURCE_EXHAUSTED: ``quota_violations`` names the limit met."""


class NexusPermissionDenied(NexusClientError):
    """PERMISSION_DENIED: ``error_info`` says why."""


class NexusUnauthenticated(NexusClientError):
    """UNAUTHENTICATED: ``error_info`` says whether the key was missing or unknown."""


class NexusUnavailable(NexusClientError):
    """UNAVAILABLE: the server or a dependency of it is down; retry later."""


class NexusDeadlineExceeded(NexusClientError):
    """DEADLINE_EXCEEDED."""


class NexusCancelled(NexusClientError):
    """CANCELLED."""


class NexusUnimplemented(NexusClientError):
    """UNIMPLEMENTED: the server does not have this RPC (an older server)."""


class NexusInternal(NexusClientError):
    """INTERNAL: the server failed; its log has the request id."""


_BY_CODE: dict[grpc.StatusCode, type[NexusClientError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: NexusInvalidArgument,
    grpc.StatusCode.NOT_FOUND: NexusNotFound,
    grpc.StatusCode.ALREADY_EXISTS: NexusAlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: NexusFailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: NexusResourceExhausted,
    grpc.StatusCode.PERMISSION_DENIED: NexusPermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: NexusUnauthenticated,
    grpc.StatusCode.UNAVAILABLE: NexusUnavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: NexusDeadlineExceeded,
    grpc.StatusCode.CANCELLED: NexusCancelled,
    grpc.StatusCode.UNIMPLEMENTED: NexusUnimplemented,
    grpc.StatusCode.INTERNAL: NexusInternal,
}


class ServerStream(Generic[T]):
    """The messages of one server-streaming call, as an async iterator.

    The call starts on first iteration (or ``async with``).  A failed call raises
    ``NexusClientError`` from ``__anext__``; ``cancel()`` ends the iteration.
    """

    def __init__(self, start: Callable[[], grpc.aio.UnaryStreamCall]) -> None:
        self._start = start
        self._call: grpc.aio.UnaryStreamCall | None = None
        self._done = False
        self._cancelled = False
        self._trailers: dict[str, str] | None = None

    @property
    def trailers(self) -> dict[str, str] | None:
        """The call's trailing metadata once the stream has ended (None before)."""
        return None if self._trailers is None else dict(self._trailers)

    @property
    def empty_reason(self) -> str | None:
        """Why the stream ended with no message, as the server said
        (x-nexus-empty-reason: ``CODE: sentence``); None when it did not."""
        return (self._trailers or {}).get(views.EMPTY_REASON_KEY)

    @property
    def degraded_reason(self) -> str | None:
        """Why the answer is less than the whole search (x-nexus-degraded)."""
        return (self._trailers or {}).get(views.DEGRADED_KEY)

    @property
    def selection_method(self) -> str | None:
        """SelectMemories: how it chose (``llm`` or ``semantic``), also when it
        chose nothing."""
        return (self._trailers or {}).get(views.SELECTION_METHOD_KEY)

    @property
    def call(self) -> grpc.aio.UnaryStreamCall:
        """The underlying ``grpc.aio`` call (started if it was not yet)."""
        if self._call is None:
            self._call = self._start()
        return self._call

    def __aiter__(self) -> ServerStream[T]:
        return self

    async def __anext__(self) -> T:
        if self._done:
            raise StopAsyncIteration
        call = self.call
        try:
            item = await call.read()
        except grpc.aio.AioRpcError as exc:
            self._done = True
            if self._cancelled and exc.code() == grpc.StatusCode.CANCELLED:
                raise StopAsyncIteration from None
            raise NexusClientError.from_rpc_error(exc) from exc
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._cancelled and not (task is not None and task.cancelling()):
                self._done = True
                raise StopAsyncIteration from None
            raise
        if item is grpc.aio.EOF:
            self._done = True
            self._trailers = _text_metadata(await call.trailing_metadata())
            raise StopAsyncIteration
        return views.view(item)  # type: ignore[no-any-return]

    def cancel(self) -> bool:
        """Cancels the call; iteration then stops.  False if it had already finished."""
        self._cancelled = True
        self._done = True
        if self._call is None:
            return False
        return self._call.cancel()

    async def aclose(self) -> None:
        if self._call is not None and not self._call.done():
            self.cancel()
        self._done = True

    async def collect(self) -> list[T]:
        """Reads the whole stream into a list."""
        return [item async for item in self]

    async def __aenter__(self) -> ServerStream[T]:
        _ = self.call
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class ClientBase:
    """Connection, deadlines and call plumbing of ``NexusClient``; see the module docstring.

    The ``grpc.aio`` channel is created on first use: a secure channel when any of
    ``root_certificates``, ``private_key`` or ``certificate_chain`` is given, else
    an insecure one.  ``api_key`` is sent as ``authorization: Bearer KEY`` on every
    call.  ``timeout`` is the default deadline in seconds for every call except the
    long-lived ``watch_extractions`` stream (``None``: no deadline).  ``retry`` is
    the gRPC retry policy of the safe calls (``None``: every call is tried once);
    ``wait_for_ready`` makes calls wait for a (re)connection within their deadline
    instead of failing at once while the server is down.
    """

    def __init__(
        self,
        target: str,
        *,
        api_key: str | None = None,
        root_certificates: bytes | None = None,
        private_key: bytes | None = None,
        certificate_chain: bytes | None = None,
        timeout: float | None = 30.0,
        retry: RetryPolicy | None = DEFAULT_RETRY,
        wait_for_ready: bool | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._api_key = api_key
        self._root_certificates = root_certificates
        self._private_key = private_key
        self._certificate_chain = certificate_chain
        self._retry = retry
        self._wait_for_ready = wait_for_ready
        self._options = tuple(options)
        self._base_metadata: tuple[tuple[str, str], ...] = bearer_metadata(api_key)
        self._channel: grpc.aio.Channel | None = None
        self._stubs: dict[str, Any] = {}

    # --- lifecycle ----------------------------------------------------------------

    @property
    def secure(self) -> bool:
        return any(
            x is not None
            for x in (self._root_certificates, self._private_key, self._certificate_chain)
        )

    @property
    def channel(self) -> grpc.aio.Channel:
        """The ``grpc.aio`` channel, created on first access."""
        if self._channel is None:
            self._channel = open_channel(
                self.target,
                root_certificates=self._root_certificates,
                private_key=self._private_key,
                certificate_chain=self._certificate_chain,
                retry=self._retry,
                options=self._options,
            )
            self._stubs = {}
        return self._channel

    def stub(self, service: str) -> Any:
        """The generated stub for ``MemoryService``, ``GraphService``, ``SummaryService``
        or ``Health`` on this client's channel."""
        stub = self._stubs.get(service)
        if stub is None:
            try:
                factory = _STUBS[service]
            except KeyError:
                raise ValueError(f"unknown service {service!r}") from None
            stub = self._stubs[service] = factory(self.channel)
        return stub

    def opened_on(self) -> asyncio.AbstractEventLoop | None:
        """The event loop this client's channel was opened on; None before its first call."""
        if self._channel is None:
            return None
        return getattr(self._channel, "_loop", None)

    def copy(self: _Self) -> _Self:
        """A client with this one's target, key, TLS files, deadline and retry
        policy, and a channel of its own: a ``grpc.aio`` channel belongs to the
        event loop it was opened on, so code running on another loop (a
        framework's synchronous API, served from a thread) needs its own."""
        return type(self)(
            self.target,
            api_key=self._api_key,
            root_certificates=self._root_certificates,
            private_key=self._private_key,
            certificate_chain=self._certificate_chain,
            timeout=self.timeout,
            retry=self._retry,
            wait_for_ready=self._wait_for_ready,
            options=self._options,
        )

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Waits until the channel is connected; ``TimeoutError`` when it is not in time."""
        await asyncio.wait_for(self.channel.channel_ready(), timeout)

    async def close(self, grace: float | None = None) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            self._stubs = {}
            await channel.close(grace)

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- plumbing -------------------------------------------------------------------

    def _request(
        self, cls: type[T], request: T | Mapping[str, Any] | None, fields: dict[str, Any]
    ) -> T:
        # Labels for enums, views of earlier answers: what protobuf takes.
        if request is None:
            return cls(**views.plain_fields(cls.DESCRIPTOR, fields))
        if fields:
            raise TypeError(
                f"pass either a {cls.__name__} or its fields as keyword arguments, not both"
            )
        request = views.plain(request)
        if isinstance(request, cls):
            return request
        if isinstance(request, Mapping):
            return cls(**views.plain_fields(cls.DESCRIPTOR, request))
        raise TypeError(f"expected {cls.__name__}, got {type(request).__name__}")

    @staticmethod
    def _with_request_id(message: T) -> T:
        """``message``, with a fresh request_id when it has the field and it is empty."""
        if REQUEST_ID_FIELD not in message.DESCRIPTOR.fields_by_name:
            return message
        if getattr(message, REQUEST_ID_FIELD):
            return message
        filled = type(message)()
        filled.CopyFrom(message)  # the caller's message stays as it was
        setattr(filled, REQUEST_ID_FIELD, uuid.uuid4().hex)
        return filled

    def _call_options(
        self,
        cls: type[Message],
        rpc: str,
        request: Any,
        fields: dict[str, Any],
        timeout: Timeout,
        call_metadata: CallMetadata,
        metadata: MetadataArg,
    ) -> tuple[float | None, tuple[tuple[str, Any], ...]]:
        """The deadline and the call metadata. ``metadata`` is the request's
        field where it has one and a mapping or Struct was given; otherwise
        the call option's deprecated spelling."""
        has_field = "metadata" in cls.DESCRIPTOR.fields_by_name
        if isinstance(metadata, Mapping | Struct | views.MessageView):
            if not has_field:
                raise TypeError(
                    f"{cls.__name__} has no metadata field; gRPC call metadata is"
                    " call_metadata=, a sequence of (key, value) pairs"
                )
            if request is not None:
                raise TypeError(
                    f"pass either a {cls.__name__} or its fields as keyword arguments, not both"
                )
            fields["metadata"] = metadata
        elif metadata is not None:
            warnings.warn(
                "metadata= as gRPC call metadata is deprecated: use call_metadata="
                + (f" ({cls.__name__}.metadata is the request's own field)" if has_field else ""),
                DeprecationWarning,
                stacklevel=4,
            )
            if call_metadata is not None:
                raise TypeError("gRPC call metadata given twice: use call_metadata= alone")
            call_metadata = metadata
        if timeout is DEFAULT:
            timeout = None if rpc in _LONG_LIVED else self.timeout
        assert not isinstance(timeout, EllipsisType)
        sent = [*self._base_metadata, *(call_metadata or ())]
        # The caller's trace continues on the server (when it uses OpenTelemetry).
        tracing.inject(sent)
        return timeout, tuple(sent)

    async def _unary(
        self,
        service: str,
        rpc: str,
        cls: type[T],
        request: Any,
        fields: dict[str, Any],
        timeout: Timeout,
        call_metadata: CallMetadata,
        metadata: MetadataArg = None,
    ) -> Any:
        # The generated methods pass every keyword; None means "not given".
        fields = {k: v for k, v in fields.items() if v is not None}
        deadline, sent = self._call_options(
            cls, rpc, request, fields, timeout, call_metadata, metadata
        )
        message = self._with_request_id(self._request(cls, request, fields))
        method = getattr(self.stub(service), rpc)
        try:
            call = method(
                message,
                timeout=deadline,
                metadata=sent or None,
                wait_for_ready=self._wait_for_ready,
            )
            response = await call
            trailers = _text_metadata(await call.trailing_metadata())
        except grpc.aio.AioRpcError as exc:
            raise NexusClientError.from_rpc_error(exc) from exc
        return views.view(response, trailers)

    def _stream(
        self,
        service: str,
        rpc: str,
        cls: type[T],
        request: Any,
        fields: dict[str, Any],
        timeout: Timeout,
        call_metadata: CallMetadata,
        metadata: MetadataArg = None,
    ) -> Any:
        # The generated methods pass every keyword; None means "not given".
        fields = {k: v for k, v in fields.items() if v is not None}
        deadline, sent = self._call_options(
            cls, rpc, request, fields, timeout, call_metadata, metadata
        )
        message = self._with_request_id(self._request(cls, request, fields))

        def start() -> grpc.aio.UnaryStreamCall:
            method = getattr(self.stub(service), rpc)
            return method(  # type: ignore[no-any-return]
                message,
                timeout=deadline,
                metadata=sent or None,
                wait_for_ready=self._wait_for_ready,
            )

        return ServerStream(start)

    async def _client_stream(
        self,
        service: str,
        rpc: str,
        cls: type[T],
        requests: Iterable[T | Mapping[str, Any]] | AsyncIterable[T | Mapping[str, Any]],
        timeout: Timeout,
        call_metadata: CallMetadata,
        metadata: MetadataArg = None,
    ) -> Any:
        """A client-streaming call: ``requests`` (messages or their fields as
        mappings, from a plain or an async iterable) are sent as they come,
        and the one answer is returned. Nothing is filled in: a streamed
        item's request_id is the caller's, so that resending it is safe."""
        deadline, sent = self._call_options(cls, rpc, None, {}, timeout, call_metadata, metadata)

        async def messages() -> AsyncIterator[T]:
            if isinstance(requests, AsyncIterable):
                async for item in requests:
                    yield self._request(cls, item, {})
            else:
                for item in requests:
                    yield self._request(cls, item, {})

        method = getattr(self.stub(service), rpc)
        try:
            call = method(
                messages(),
                timeout=deadline,
                metadata=sent or None,
                wait_for_ready=self._wait_for_ready,
            )
            response = await call
            trailers = _text_metadata(await call.trailing_metadata())
        except grpc.aio.AioRpcError as exc:
            raise NexusClientError.from_rpc_error(exc) from exc
        return views.view(response, trailers)

    # --- grpc.health.v1.Health --------------------------------------------------------

    async def check_health(
        self,
        service: str = "",
        *,
        timeout: Timeout = DEFAULT,
        call_metadata: CallMetadata = None,
        metadata: CallMetadata = None,
    ) -> str:
        """grpc.health.v1.Health.Check: the status name (``SERVING``, ``NOT_SERVING``...).
        ``metadata=`` is ``call_metadata=``'s deprecated spelling."""
        response = await self._unary(
            "Health",
            "Check",
            health_pb2.HealthCheckRequest,
            None,
            {"service": service},
            timeout,
            call_metadata,
            metadata,
        )
        return health_pb2.HealthCheckResponse.ServingStatus.Name(int(response.status))
