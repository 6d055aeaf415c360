"""NexusClient and doctor against a tiny in-process grpc.aio server.

The fake servicers here implement a handful of RPCs with canned-but-valid
messages; tests/test_bench.py imports ``running_server`` from this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import socket
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from nexus_grpc.client import RPCS, NexusClient, NexusClientError, ServerStream
from nexus_grpc.doctor import doctor
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2

REQUEST_ID = "req-test-1"


class FakeMemory(memory_grpc.MemoryServiceServicer):
    def __init__(self) -> None:
        self.projects: dict[int, memory_pb2.Project] = {}
        self.sessions: dict[int, memory_pb2.Session] = {}
        self.episodes: dict[int, memory_pb2.Episode] = {}
        self.by_request_id: dict[str, int] = {}
        self.seen_metadata: list[dict[str, str]] = []
        self.state = "SERVING"

    def _note(self, context: grpc.aio.ServicerContext) -> None:
        self.seen_metadata.append(
            {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        )

    async def _abort(
        self, context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str
    ) -> None:
        context.set_trailing_metadata((("x-request-id", REQUEST_ID),))
        await context.abort(code, message)

    async def CreateProject(self, request, context):
        self._note(context)
        project = memory_pb2.Project()
        project.CopyFrom(request.project)
        project.id = len(self.projects) + 1
        self.projects[project.id] = project
        return project

    async def CreateSession(self, request, context):
        self._note(context)
        session = memory_pb2.Session()
        session.CopyFrom(request.session)
        session.id = len(self.sessions) + 1
        session.external_id = session.external_id or f"ext-{session.id}"
        self.sessions[session.id] = session
        return session

    async def CreateEpisode(self, request, context):
        self._note(context)
        if request.session_id not in self.sessions:
            await self._abort(
                context, grpc.StatusCode.NOT_FOUND, f"session {request.session_id} not found"
            )
        if request.request_id and request.request_id in self.by_request_id:
            return self.episodes[self.by_request_id[request.request_id]]
        episode = memory_pb2.Episode(
            id=len(self.episodes) + 1,
            session_id=request.session_id,
            user_message=request.user_message,
            ai_response=request.ai_response,
            embedding_state=memory_pb2.JOB_STATE_PENDING,
            extraction_state=memory_pb2.JOB_STATE_PENDING,
        )
        if request.HasField("metadata"):
            episode.metadata.CopyFrom(request.metadata)
        episode.create_time.GetCurrentTime()
        self.episodes[episode.id] = episode
        if request.request_id:
            self.by_request_id[request.request_id] = episode.id
        return episode

    async def GetEpisode(self, request, context):
        self._note(context)
        episode = self.episodes.get(request.id)
        if episode is None:
            await self._abort(
                context, grpc.StatusCode.NOT_FOUND, f"episode {request.id} not found"
            )
        return episode

    async def SearchEpisodes(self, request, context):
        self._note(context)
        if not request.query.strip():
            await self._abort(context, grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        words = set(request.query.lower().split())
        limit = request.limit or 10
        found = 0
        for episode in reversed(list(self.episodes.values())):
            text = f"{episode.user_message} {episode.ai_response}".lower()
            if words & set(text.replace(".", " ").split()):
                found += 1
                yield memory_pb2.SearchHit(
                    episode=episode,
                    score=1.0 / found,
                    snippet=episode.user_message[:40],
                    sources=[memory_pb2.SEARCH_SOURCE_KEYWORD],
                )
                if found >= limit:
                    return

    async def GetServiceStatus(self, request, context):
        self._note(context)
        degraded = self.state != "SERVING"
        return memory_pb2.ServiceStatus(
            state=self.state,
            schema_version=3,
            embedding_model="minilm-int8",
            embedding_dimension=384,
            dependencies=[
                memory_pb2.DependencyStatus(name="sqlite", ok=True, detail="wal"),
                memory_pb2.DependencyStatus(
                    name="llm", ok=not degraded, detail="connection refused" if degraded else ""
                ),
            ],
            queues=[
                memory_pb2.QueueStatus(
                    kind="embedding", pending=2, failed=0, oldest_pending_age_seconds=1.5
                ),
                memory_pb2.QueueStatus(kind="extraction", pending=0, failed=1),
            ],
        )


class FakeGraph(graph_grpc.GraphServiceServicer):
    """WatchExtractions that never has an event: watchers wait until they cancel."""

    async def WatchExtractions(self, request, context):
        if request.session_id == -1:
            yield graph_pb2.ExtractionEvent(event_id=1, status=graph_pb2.EXTRACTION_STATUS_DONE)
        await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def running_server() -> AsyncIterator[tuple[str, FakeMemory]]:
    """Starts the fake server on 127.0.0.1:0; yields its target and memory servicer."""
    server = grpc.aio.server()
    memory = FakeMemory()
    memory_grpc.add_MemoryServiceServicer_to_server(memory, server)
    graph_grpc.add_GraphServiceServicer_to_server(FakeGraph(), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set(
        "nexus.memory.v1.MemoryService", health_pb2.HealthCheckResponse.SERVING
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", memory
    finally:
        await server.stop(None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, FakeMemory]]:
    async with running_server() as running:
        yield running


@pytest.fixture
async def client(server) -> AsyncIterator[NexusClient]:
    target, _ = server
    async with NexusClient(target, api_key="sekret", timeout=5.0) as c:
        yield c


# --- method table ---------------------------------------------------------------------


def test_every_rpc_has_a_real_method():
    services = {
        "MemoryService": memory_pb2.DESCRIPTOR.services_by_name["MemoryService"],
        "GraphService": graph_pb2.DESCRIPTOR.services_by_name["GraphService"],
        "SummaryService": summary_pb2.DESCRIPTOR.services_by_name["SummaryService"],
    }
    expected = {
        (service, method.name, method.server_streaming)
        for service, descriptor in services.items()
        for method in descriptor.methods
    }
    assert {(s, r, streaming) for _, s, r, streaming in RPCS} == expected
    for name, _service, rpc, streaming in RPCS:
        method = NexusClient.__dict__.get(name)
        assert method is not None, name
        assert method.__name__ == name
        assert rpc in (method.__doc__ or "")
        assert inspect.iscoroutinefunction(method) is (not streaming), name
    for name in ("create_project", "search_episodes", "watch_extractions",
                 "summarize_project", "check_health"):
        assert callable(getattr(NexusClient, name))


# --- unary ------------------------------------------------------------------------------


async def test_unary_with_request_and_with_kwargs(client, server):
    _, memory = server
    session = await client.create_session(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(name="a"))
    )
    assert isinstance(session, memory_pb2.Session)
    assert session.id == 1 and session.name == "a"

    session2 = await client.create_session(session=memory_pb2.Session(name="b"))
    assert session2.id == 2 and session2.name == "b"

    by_kwargs = await client.create_episode(session_id=1, user_message="hi", request_id="r1")
    by_request = await client.create_episode(
        memory_pb2.CreateEpisodeRequest(session_id=1, user_message="hi", request_id="r1")
    )
    assert by_kwargs == by_request  # idempotent retry: the same episode
    assert by_kwargs.user_message == "hi"

    by_dict = await client.get_episode({"id": by_kwargs.id})
    assert by_dict.id == by_kwargs.id

    # The API key travels on every call.
    assert all(md.get("authorization") == "Bearer sekret" for md in memory.seen_metadata)


async def test_request_metadata_field_vs_call_metadata(client, server):
    _, memory = server
    await client.create_session(session=memory_pb2.Session(name="s"))
    episode = await client.create_episode(
        session_id=1, user_message="x", metadata={"source": "test"}
    )
    assert episode.metadata == struct_pb2.Struct(fields={
        "source": struct_pb2.Value(string_value="test")
    })
    await client.get_episode(id=episode.id, metadata=[("x-trace", "abc")])
    assert memory.seen_metadata[-1]["x-trace"] == "abc"
    assert memory.seen_metadata[-1]["authorization"] == "Bearer sekret"
    with pytest.raises(TypeError):
        await client.get_episode(id=episode.id, metadata={"x-trace": "abc"})


async def test_request_and_kwargs_together_is_a_type_error(client):
    with pytest.raises(TypeError):
        await client.get_episode(memory_pb2.GetEpisodeRequest(id=1), id=2)
    with pytest.raises(TypeError):
        await client.get_episode(memory_pb2.GetProjectRequest(id=1))


# --- errors -----------------------------------------------------------------------------


async def test_error_maps_to_nexus_client_error(client):
    with pytest.raises(NexusClientError) as info:
        await client.get_episode(id=404)
    err = info.value
    assert err.code == grpc.StatusCode.NOT_FOUND
    assert err.message == "episode 404 not found"
    assert err.request_id == REQUEST_ID
    assert "NOT_FOUND" in str(err)
    assert isinstance(err.__cause__, grpc.aio.AioRpcError)


async def test_unimplemented_rpc_maps_too(client):
    with pytest.raises(NexusClientError) as info:
        await client.get_project(id=1)
    assert info.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert info.value.request_id is None


async def test_unreachable_server():
    async with NexusClient(f"127.0.0.1:{free_port()}", timeout=0.5) as c:
        with pytest.raises(NexusClientError) as info:
            await c.check_health()
    assert info.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


# --- streaming --------------------------------------------------------------------------


async def test_server_streaming(client):
    await client.create_session(session=memory_pb2.Session(name="s"))
    for text in ("alpha beta", "beta gamma", "delta"):
        await client.create_episode(session_id=1, user_message=text)

    stream = client.search_episodes(query="beta", session_id=1)
    assert isinstance(stream, ServerStream)
    hits = [hit async for hit in stream]
    assert [h.episode.user_message for h in hits] == ["beta gamma", "alpha beta"]
    assert all(isinstance(h, memory_pb2.SearchHit) for h in hits)

    request = memory_pb2.SearchEpisodesRequest(query="delta", session_id=1)
    assert [h.episode.user_message for h in await client.search_episodes(request).collect()] == [
        "delta"
    ]
    assert await client.search_episodes(query="nothing-matches").collect() == []


async def test_stream_error_raises_nexus_client_error(client):
    with pytest.raises(NexusClientError) as info:
        async for _ in client.search_episodes(query="  "):
            pass
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.request_id == REQUEST_ID


async def test_stream_cancel_and_timeout(client):
    async with client.watch_extractions(session_id=-1) as stream:
        event = await stream.__anext__()
        assert event.event_id == 1
        assert stream.cancel()
        assert [e async for e in stream] == []

    # watch_extractions has no default deadline, but a per-call one applies.
    with pytest.raises(NexusClientError) as info:
        await client.watch_extractions(session_id=5, timeout=0.2).collect()
    assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


# --- health -----------------------------------------------------------------------------


async def test_check_health(client):
    assert await client.check_health() == "SERVING"
    assert await client.check_health("nexus.memory.v1.MemoryService") == "SERVING"
    with pytest.raises(NexusClientError) as info:
        await client.check_health("no.such.Service")
    assert info.value.code == grpc.StatusCode.NOT_FOUND


async def test_channel_is_lazy_and_reopens(server):
    target, _ = server
    c = NexusClient(target)
    assert c._channel is None
    assert await c.check_health() == "SERVING"
    assert c._channel is not None
    await c.close()
    assert c._channel is None
    assert await c.check_health() == "SERVING"  # a fresh channel
    await c.close()


# --- doctor -----------------------------------------------------------------------------


async def test_doctor_serving(server):
    target, _ = server
    out = io.StringIO()
    assert await doctor(target, 2.0, out=out) == 0
    text = out.getvalue()
    for needle in ("SERVING", "schema version    3", "minilm-int8", "384", "sqlite",
                   "embedding", "extraction"):
        assert needle in text, needle


async def test_doctor_degraded(server):
    target, memory = server
    memory.state = "DEGRADED"
    out = io.StringIO()
    assert await doctor(target, 2.0, out=out) == 1
    assert "FAIL" in out.getvalue() and "connection refused" in out.getvalue()


async def test_doctor_unreachable():
    out = io.StringIO()
    assert await doctor(f"127.0.0.1:{free_port()}", 0.5, out=out) == 2
    assert "unreachable" in out.getvalue()
