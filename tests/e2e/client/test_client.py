"""NexusClient and doctor against a tiny in-process grpc.aio server
(tests/fake_server.py).

That every RPC has its generated method, and the retry policy, are read without a
server in tests/unit/test_client_generated.py; a request's refusals made before a call
(a message and keywords together, call metadata where the request has no field) in
tests/unit/test_client_requests_and_views.py; doctor's report of a given status, line by
line, in tests/unit/test_client_doctor_report.py. What the client makes of a call and
its failure, on a stand-in stub (the deadline and metadata given, ``metadata=``'s
deprecated spelling, a failure's class, request id and decoded details, an RPC the
server lacks, a stream's trailers and cancel) in
tests/unit/test_client_rules_calls_and_errors.py; here, each path once over a real
channel.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest
from google.protobuf import struct_pb2

from nexus_grpc.client import NexusClient, NexusClientError, ServerStream
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.doctor import doctor
from tests.fake_server import REQUEST_ID, FakeMemory, free_port, running_server


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, FakeMemory]]:
    async with running_server() as running:
        yield running


@pytest.fixture
async def client(server) -> AsyncIterator[NexusClient]:
    target, _ = server
    async with NexusClient(target, api_key="sekret", timeout=5.0) as c:
        yield c


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
    assert episode.metadata == struct_pb2.Struct(
        fields={"source": struct_pb2.Value(string_value="test")}
    )
    await client.get_episode(id=episode.id, call_metadata=[("x-trace", "abc")])
    assert memory.seen_metadata[-1]["x-trace"] == "abc"
    assert memory.seen_metadata[-1]["authorization"] == "Bearer sekret"


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
    for needle in (
        "SERVING",
        "schema version    3",
        "minilm-int8",
        "384",
        "sqlite",
        "embedding",
        "extraction",
    ):
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
