"""Typed async client for the nexus-grpc services.

``NexusClient`` wraps the generated stubs of ``nexus.memory.v1.MemoryService``,
``nexus.graph.v1.GraphService``, ``nexus.summary.v1.SummaryService`` and
``grpc.health.v1.Health`` with one snake_case method per RPC::

    async with NexusClient("127.0.0.1:50051", api_key="secret") as client:
        session = await client.create_session(session=memory_pb2.Session(name="demo"))
        episode = await client.create_episode(session_id=session.id, user_message="hi")
        async for hit in client.search_episodes(query="hi", session_id=session.id):
            print(hit.score, hit.snippet)

Every method takes either a request message or the request's fields as keyword
arguments (``create_episode(session_id=1, user_message="hi")`` builds
``CreateEpisodeRequest(session_id=1, user_message="hi")``), plus optional per-call
``timeout=`` (seconds; ``None`` for no deadline) and ``metadata=`` (gRPC metadata:
a sequence of ``(key, value)`` pairs or ``grpc.aio.Metadata``).  Because
``CreateEpisodeRequest`` also has a field called ``metadata``, a mapping or
``Struct`` passed as ``metadata=`` to a method whose request has that field is
the request field, never gRPC metadata.

Unary methods return the response message.  Server-streaming methods return a
``ServerStream``: an async iterator of messages that starts the call on first
use and can be cancelled (``stream.cancel()`` or ``async with stream:``).

Every failed RPC raises ``NexusClientError`` carrying the status code, the
status message and the server's ``x-request-id`` when it sent one.
"""

# The ``timeout`` parameters are gRPC deadlines handed to the call, not asyncio timeouts.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from types import EllipsisType, TracebackType
from typing import Any, Generic, TypeAlias, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import Struct
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2_grpc as summary_grpc

__all__ = [
    "DEFAULT",
    "RPCS",
    "NexusClient",
    "NexusClientError",
    "ServerStream",
]

T = TypeVar("T", bound=Message)

#: Sentinel for "use the client's default timeout".
DEFAULT: EllipsisType = ...
Timeout: TypeAlias = float | None | EllipsisType
MetadataArg: TypeAlias = (
    Sequence[tuple[str, str | bytes]] | grpc.aio.Metadata | Mapping[str, Any] | Struct | None
)

REQUEST_ID_KEY = "x-request-id"

# Streams that stay open by design: the client's default deadline does not apply.
_LONG_LIVED = frozenset({"WatchExtractions"})

_STUBS: dict[str, Callable[[grpc.aio.Channel], Any]] = {
    "MemoryService": memory_grpc.MemoryServiceStub,
    "GraphService": graph_grpc.GraphServiceStub,
    "SummaryService": summary_grpc.SummaryServiceStub,
    "Health": health_pb2_grpc.HealthStub,
}

_DESCRIPTORS = {
    "MemoryService": memory_pb2.DESCRIPTOR.services_by_name["MemoryService"],
    "GraphService": graph_pb2.DESCRIPTOR.services_by_name["GraphService"],
    "SummaryService": summary_pb2.DESCRIPTOR.services_by_name["SummaryService"],
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
    for service, descriptor in _DESCRIPTORS.items()
    for method in descriptor.methods
)


class NexusClientError(Exception):
    """A failed RPC: the gRPC status code, its message and the server's request id."""

    def __init__(
        self, code: grpc.StatusCode, message: str, request_id: str | None = None
    ) -> None:
        self.code = code
        self.message = message
        self.request_id = request_id
        text = f"{code.name}: {message}"
        if request_id:
            text += f" (request id {request_id})"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message, self.request_id))

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
        return cls(exc.code(), exc.details() or "", request_id)


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
            raise StopAsyncIteration
        return item  # type: ignore[no-any-return]

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


class NexusClient:
    """Async client for every nexus-grpc RPC; see the module docstring.

    The ``grpc.aio`` channel is created on first use: a secure channel when any of
    ``root_certificates``, ``private_key`` or ``certificate_chain`` is given, else
    an insecure one.  ``api_key`` is sent as ``authorization: Bearer KEY`` on every
    call.  ``timeout`` is the default deadline in seconds for every call except the
    long-lived ``watch_extractions`` stream (``None``: no deadline).
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
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._api_key = api_key
        self._root_certificates = root_certificates
        self._private_key = private_key
        self._certificate_chain = certificate_chain
        self._options = tuple(options)
        self._base_metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {api_key}"),) if api_key else ()
        )
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
            if self.secure:
                credentials = grpc.ssl_channel_credentials(
                    root_certificates=self._root_certificates,
                    private_key=self._private_key,
                    certificate_chain=self._certificate_chain,
                )
                self._channel = grpc.aio.secure_channel(
                    self.target, credentials, options=self._options
                )
            else:
                self._channel = grpc.aio.insecure_channel(self.target, options=self._options)
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

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Waits until the channel is connected; ``TimeoutError`` when it is not in time."""
        await asyncio.wait_for(self.channel.channel_ready(), timeout)

    async def close(self, grace: float | None = None) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            self._stubs = {}
            await channel.close(grace)

    async def __aenter__(self) -> NexusClient:
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
        if request is None:
            return cls(**fields)
        if fields:
            raise TypeError(
                f"pass either a {cls.__name__} or its fields as keyword arguments, not both"
            )
        if isinstance(request, cls):
            return request
        if isinstance(request, Mapping):
            return cls(**request)
        raise TypeError(f"expected {cls.__name__}, got {type(request).__name__}")

    def _call_options(
        self,
        cls: type[Message],
        rpc: str,
        request: Any,
        fields: dict[str, Any],
        timeout: Timeout,
        metadata: MetadataArg,
    ) -> tuple[float | None, tuple[tuple[str, Any], ...]]:
        if isinstance(metadata, Mapping | Struct):
            if request is None and "metadata" in cls.DESCRIPTOR.fields_by_name:
                fields["metadata"] = metadata
                metadata = None
            else:
                raise TypeError(
                    "metadata= is gRPC call metadata: a sequence of (key, value) pairs"
                )
        if timeout is DEFAULT:
            timeout = None if rpc in _LONG_LIVED else self.timeout
        assert not isinstance(timeout, EllipsisType)
        call_metadata = self._base_metadata + tuple(metadata or ())
        return timeout, call_metadata

    async def _unary(
        self,
        service: str,
        rpc: str,
        cls: type[T],
        request: Any,
        fields: dict[str, Any],
        timeout: Timeout,
        metadata: MetadataArg,
    ) -> Any:
        deadline, call_metadata = self._call_options(
            cls, rpc, request, fields, timeout, metadata
        )
        message = self._request(cls, request, fields)
        method = getattr(self.stub(service), rpc)
        try:
            return await method(message, timeout=deadline, metadata=call_metadata or None)
        except grpc.aio.AioRpcError as exc:
            raise NexusClientError.from_rpc_error(exc) from exc

    def _stream(
        self,
        service: str,
        rpc: str,
        cls: type[T],
        request: Any,
        fields: dict[str, Any],
        timeout: Timeout,
        metadata: MetadataArg,
    ) -> Any:
        deadline, call_metadata = self._call_options(
            cls, rpc, request, fields, timeout, metadata
        )
        message = self._request(cls, request, fields)

        def start() -> grpc.aio.UnaryStreamCall:
            method = getattr(self.stub(service), rpc)
            return method(message, timeout=deadline, metadata=call_metadata or None)  # type: ignore[no-any-return]

        return ServerStream(start)

    # --- grpc.health.v1.Health --------------------------------------------------------

    async def check_health(
        self, service: str = "", *, timeout: Timeout = DEFAULT, metadata: MetadataArg = None
    ) -> str:
        """grpc.health.v1.Health.Check: the status name (``SERVING``, ``NOT_SERVING``...)."""
        response = await self._unary(
            "Health", "Check", health_pb2.HealthCheckRequest,
            None, {"service": service}, timeout, metadata,
        )
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    # --- nexus.memory.v1.MemoryService --------------------------------------------------

    async def create_project(
        self,
        request: memory_pb2.CreateProjectRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Project:
        """MemoryService.CreateProject: returns ``Project``."""
        return await self._unary(
            "MemoryService", "CreateProject", memory_pb2.CreateProjectRequest,
            request, fields, timeout, metadata,
        )

    async def get_project(
        self,
        request: memory_pb2.GetProjectRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Project:
        """MemoryService.GetProject: returns ``Project``."""
        return await self._unary(
            "MemoryService", "GetProject", memory_pb2.GetProjectRequest,
            request, fields, timeout, metadata,
        )

    async def list_projects(
        self,
        request: memory_pb2.ListProjectsRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.ListProjectsResponse:
        """MemoryService.ListProjects: returns ``ListProjectsResponse``."""
        return await self._unary(
            "MemoryService", "ListProjects", memory_pb2.ListProjectsRequest,
            request, fields, timeout, metadata,
        )

    async def update_project(
        self,
        request: memory_pb2.UpdateProjectRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Project:
        """MemoryService.UpdateProject: returns ``Project``."""
        return await self._unary(
            "MemoryService", "UpdateProject", memory_pb2.UpdateProjectRequest,
            request, fields, timeout, metadata,
        )

    async def delete_project(
        self,
        request: memory_pb2.DeleteProjectRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.DeleteProjectResponse:
        """MemoryService.DeleteProject: returns ``DeleteProjectResponse``."""
        return await self._unary(
            "MemoryService", "DeleteProject", memory_pb2.DeleteProjectRequest,
            request, fields, timeout, metadata,
        )

    async def create_session(
        self,
        request: memory_pb2.CreateSessionRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Session:
        """MemoryService.CreateSession: returns ``Session``."""
        return await self._unary(
            "MemoryService", "CreateSession", memory_pb2.CreateSessionRequest,
            request, fields, timeout, metadata,
        )

    async def get_session(
        self,
        request: memory_pb2.GetSessionRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Session:
        """MemoryService.GetSession: returns ``Session``."""
        return await self._unary(
            "MemoryService", "GetSession", memory_pb2.GetSessionRequest,
            request, fields, timeout, metadata,
        )

    async def list_sessions(
        self,
        request: memory_pb2.ListSessionsRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.ListSessionsResponse:
        """MemoryService.ListSessions: returns ``ListSessionsResponse``."""
        return await self._unary(
            "MemoryService", "ListSessions", memory_pb2.ListSessionsRequest,
            request, fields, timeout, metadata,
        )

    async def update_session(
        self,
        request: memory_pb2.UpdateSessionRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Session:
        """MemoryService.UpdateSession: returns ``Session``."""
        return await self._unary(
            "MemoryService", "UpdateSession", memory_pb2.UpdateSessionRequest,
            request, fields, timeout, metadata,
        )

    async def delete_session(
        self,
        request: memory_pb2.DeleteSessionRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.DeleteSessionResponse:
        """MemoryService.DeleteSession: returns ``DeleteSessionResponse``."""
        return await self._unary(
            "MemoryService", "DeleteSession", memory_pb2.DeleteSessionRequest,
            request, fields, timeout, metadata,
        )

    async def create_episode(
        self,
        request: memory_pb2.CreateEpisodeRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Episode:
        """MemoryService.CreateEpisode: returns ``Episode``."""
        return await self._unary(
            "MemoryService", "CreateEpisode", memory_pb2.CreateEpisodeRequest,
            request, fields, timeout, metadata,
        )

    async def get_episode(
        self,
        request: memory_pb2.GetEpisodeRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Episode:
        """MemoryService.GetEpisode: returns ``Episode``."""
        return await self._unary(
            "MemoryService", "GetEpisode", memory_pb2.GetEpisodeRequest,
            request, fields, timeout, metadata,
        )

    async def list_episodes(
        self,
        request: memory_pb2.ListEpisodesRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.ListEpisodesResponse:
        """MemoryService.ListEpisodes: returns ``ListEpisodesResponse``."""
        return await self._unary(
            "MemoryService", "ListEpisodes", memory_pb2.ListEpisodesRequest,
            request, fields, timeout, metadata,
        )

    async def delete_episode(
        self,
        request: memory_pb2.DeleteEpisodeRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.DeleteEpisodeResponse:
        """MemoryService.DeleteEpisode: returns ``DeleteEpisodeResponse``."""
        return await self._unary(
            "MemoryService", "DeleteEpisode", memory_pb2.DeleteEpisodeRequest,
            request, fields, timeout, metadata,
        )

    def search_episodes(
        self,
        request: memory_pb2.SearchEpisodesRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> ServerStream[memory_pb2.SearchHit]:
        """MemoryService.SearchEpisodes: streams ``SearchHit``."""
        return self._stream(
            "MemoryService", "SearchEpisodes", memory_pb2.SearchEpisodesRequest,
            request, fields, timeout, metadata,
        )

    async def create_memory(
        self,
        request: memory_pb2.CreateMemoryRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Memory:
        """MemoryService.CreateMemory: returns ``Memory``."""
        return await self._unary(
            "MemoryService", "CreateMemory", memory_pb2.CreateMemoryRequest,
            request, fields, timeout, metadata,
        )

    async def get_memory(
        self,
        request: memory_pb2.GetMemoryRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Memory:
        """MemoryService.GetMemory: returns ``Memory``."""
        return await self._unary(
            "MemoryService", "GetMemory", memory_pb2.GetMemoryRequest,
            request, fields, timeout, metadata,
        )

    async def list_memories(
        self,
        request: memory_pb2.ListMemoriesRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.ListMemoriesResponse:
        """MemoryService.ListMemories: returns ``ListMemoriesResponse``."""
        return await self._unary(
            "MemoryService", "ListMemories", memory_pb2.ListMemoriesRequest,
            request, fields, timeout, metadata,
        )

    async def update_memory(
        self,
        request: memory_pb2.UpdateMemoryRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.Memory:
        """MemoryService.UpdateMemory: returns ``Memory``."""
        return await self._unary(
            "MemoryService", "UpdateMemory", memory_pb2.UpdateMemoryRequest,
            request, fields, timeout, metadata,
        )

    async def delete_memory(
        self,
        request: memory_pb2.DeleteMemoryRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.DeleteMemoryResponse:
        """MemoryService.DeleteMemory: returns ``DeleteMemoryResponse``."""
        return await self._unary(
            "MemoryService", "DeleteMemory", memory_pb2.DeleteMemoryRequest,
            request, fields, timeout, metadata,
        )

    def search_memories(
        self,
        request: memory_pb2.SearchMemoriesRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> ServerStream[memory_pb2.MemoryHit]:
        """MemoryService.SearchMemories: streams ``MemoryHit``."""
        return self._stream(
            "MemoryService", "SearchMemories", memory_pb2.SearchMemoriesRequest,
            request, fields, timeout, metadata,
        )

    def select_memories(
        self,
        request: memory_pb2.SelectMemoriesRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> ServerStream[memory_pb2.SelectedMemory]:
        """MemoryService.SelectMemories: streams ``SelectedMemory``."""
        return self._stream(
            "MemoryService", "SelectMemories", memory_pb2.SelectMemoriesRequest,
            request, fields, timeout, metadata,
        )

    async def list_memory_usage(
        self,
        request: memory_pb2.ListMemoryUsageRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.ListMemoryUsageResponse:
        """MemoryService.ListMemoryUsage: returns ``ListMemoryUsageResponse``."""
        return await self._unary(
            "MemoryService", "ListMemoryUsage", memory_pb2.ListMemoryUsageRequest,
            request, fields, timeout, metadata,
        )

    async def get_service_status(
        self,
        request: memory_pb2.GetServiceStatusRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.ServiceStatus:
        """MemoryService.GetServiceStatus: returns ``ServiceStatus``."""
        return await self._unary(
            "MemoryService", "GetServiceStatus", memory_pb2.GetServiceStatusRequest,
            request, fields, timeout, metadata,
        )

    async def reconcile_index(
        self,
        request: memory_pb2.ReconcileIndexRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> memory_pb2.ReconcileIndexResponse:
        """MemoryService.ReconcileIndex: returns ``ReconcileIndexResponse``."""
        return await self._unary(
            "MemoryService", "ReconcileIndex", memory_pb2.ReconcileIndexRequest,
            request, fields, timeout, metadata,
        )

    # --- nexus.graph.v1.GraphService --------------------------------------------

    async def upsert_entity(
        self,
        request: graph_pb2.UpsertEntityRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> graph_pb2.Entity:
        """GraphService.UpsertEntity: returns ``Entity``."""
        return await self._unary(
            "GraphService", "UpsertEntity", graph_pb2.UpsertEntityRequest,
            request, fields, timeout, metadata,
        )

    async def get_entity(
        self,
        request: graph_pb2.GetEntityRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> graph_pb2.Entity:
        """GraphService.GetEntity: returns ``Entity``."""
        return await self._unary(
            "GraphService", "GetEntity", graph_pb2.GetEntityRequest,
            request, fields, timeout, metadata,
        )

    async def delete_entity(
        self,
        request: graph_pb2.DeleteEntityRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> graph_pb2.DeleteEntityResponse:
        """GraphService.DeleteEntity: returns ``DeleteEntityResponse``."""
        return await self._unary(
            "GraphService", "DeleteEntity", graph_pb2.DeleteEntityRequest,
            request, fields, timeout, metadata,
        )

    async def list_entities(
        self,
        request: graph_pb2.ListEntitiesRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> graph_pb2.ListEntitiesResponse:
        """GraphService.ListEntities: returns ``ListEntitiesResponse``."""
        return await self._unary(
            "GraphService", "ListEntities", graph_pb2.ListEntitiesRequest,
            request, fields, timeout, metadata,
        )

    async def upsert_relationship(
        self,
        request: graph_pb2.UpsertRelationshipRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> graph_pb2.Relationship:
        """GraphService.UpsertRelationship: returns ``Relationship``."""
        return await self._unary(
            "GraphService", "UpsertRelationship", graph_pb2.UpsertRelationshipRequest,
            request, fields, timeout, metadata,
        )

    async def list_relationships(
        self,
        request: graph_pb2.ListRelationshipsRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> graph_pb2.ListRelationshipsResponse:
        """GraphService.ListRelationships: returns ``ListRelationshipsResponse``."""
        return await self._unary(
            "GraphService", "ListRelationships", graph_pb2.ListRelationshipsRequest,
            request, fields, timeout, metadata,
        )

    async def delete_relationship(
        self,
        request: graph_pb2.DeleteRelationshipRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> graph_pb2.DeleteRelationshipResponse:
        """GraphService.DeleteRelationship: returns ``DeleteRelationshipResponse``."""
        return await self._unary(
            "GraphService", "DeleteRelationship", graph_pb2.DeleteRelationshipRequest,
            request, fields, timeout, metadata,
        )

    async def get_neighborhood(
        self,
        request: graph_pb2.GetNeighborhoodRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> graph_pb2.Subgraph:
        """GraphService.GetNeighborhood: returns ``Subgraph``."""
        return await self._unary(
            "GraphService", "GetNeighborhood", graph_pb2.GetNeighborhoodRequest,
            request, fields, timeout, metadata,
        )

    async def get_neighbors(
        self,
        request: graph_pb2.GetNeighborsRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> graph_pb2.Subgraph:
        """GraphService.GetNeighbors: returns ``Subgraph``."""
        return await self._unary(
            "GraphService", "GetNeighbors", graph_pb2.GetNeighborsRequest,
            request, fields, timeout, metadata,
        )

    def search_entities(
        self,
        request: graph_pb2.SearchEntitiesRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> ServerStream[graph_pb2.EntityHit]:
        """GraphService.SearchEntities: streams ``EntityHit``."""
        return self._stream(
            "GraphService", "SearchEntities", graph_pb2.SearchEntitiesRequest,
            request, fields, timeout, metadata,
        )

    async def extract_episode(
        self,
        request: graph_pb2.ExtractEpisodeRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> graph_pb2.ExtractEpisodeResponse:
        """GraphService.ExtractEpisode: returns ``ExtractEpisodeResponse``."""
        return await self._unary(
            "GraphService", "ExtractEpisode", graph_pb2.ExtractEpisodeRequest,
            request, fields, timeout, metadata,
        )

    def watch_extractions(
        self,
        request: graph_pb2.WatchExtractionsRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> ServerStream[graph_pb2.ExtractionEvent]:
        """GraphService.WatchExtractions: streams ``ExtractionEvent``."""
        return self._stream(
            "GraphService", "WatchExtractions", graph_pb2.WatchExtractionsRequest,
            request, fields, timeout, metadata,
        )

    # --- nexus.summary.v1.SummaryService ----------------------------------------

    async def create_summary(
        self,
        request: summary_pb2.CreateSummaryRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> summary_pb2.Summary:
        """SummaryService.CreateSummary: returns ``Summary``."""
        return await self._unary(
            "SummaryService", "CreateSummary", summary_pb2.CreateSummaryRequest,
            request, fields, timeout, metadata,
        )

    async def get_summary(
        self,
        request: summary_pb2.GetSummaryRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> summary_pb2.Summary:
        """SummaryService.GetSummary: returns ``Summary``."""
        return await self._unary(
            "SummaryService", "GetSummary", summary_pb2.GetSummaryRequest,
            request, fields, timeout, metadata,
        )

    async def update_summary(
        self,
        request: summary_pb2.UpdateSummaryRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> summary_pb2.Summary:
        """SummaryService.UpdateSummary: returns ``Summary``."""
        return await self._unary(
            "SummaryService", "UpdateSummary", summary_pb2.UpdateSummaryRequest,
            request, fields, timeout, metadata,
        )

    async def delete_summary(
        self,
        request: summary_pb2.DeleteSummaryRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> summary_pb2.DeleteSummaryResponse:
        """SummaryService.DeleteSummary: returns ``DeleteSummaryResponse``."""
        return await self._unary(
            "SummaryService", "DeleteSummary", summary_pb2.DeleteSummaryRequest,
            request, fields, timeout, metadata,
        )

    async def list_summaries(
        self,
        request: summary_pb2.ListSummariesRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> summary_pb2.ListSummariesResponse:
        """SummaryService.ListSummaries: returns ``ListSummariesResponse``."""
        return await self._unary(
            "SummaryService", "ListSummaries", summary_pb2.ListSummariesRequest,
            request, fields, timeout, metadata,
        )

    async def summarize_session(
        self,
        request: summary_pb2.SummarizeSessionRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> summary_pb2.Summary:
        """SummaryService.SummarizeSession: returns ``Summary``."""
        return await self._unary(
            "SummaryService", "SummarizeSession", summary_pb2.SummarizeSessionRequest,
            request, fields, timeout, metadata,
        )

    def summarize_project(
        self,
        request: summary_pb2.SummarizeProjectRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> ServerStream[summary_pb2.SummarizeProjectResponse]:
        """SummaryService.SummarizeProject: streams ``SummarizeProjectResponse``."""
        return self._stream(
            "SummaryService", "SummarizeProject", summary_pb2.SummarizeProjectRequest,
            request, fields, timeout, metadata,
        )

    async def get_project_overview(
        self,
        request: summary_pb2.GetProjectOverviewRequest | None = None,
        /,
        *,
        timeout: Timeout = DEFAULT,
        metadata: MetadataArg = None,
        **fields: Any,
    ) -> summary_pb2.GetProjectOverviewResponse:
        """SummaryService.GetProjectOverview: returns ``GetProjectOverviewResponse``."""
        return await self._unary(
            "SummaryService", "GetProjectOverview", summary_pb2.GetProjectOverviewRequest,
            request, fields, timeout, metadata,
        )
