"""The interceptor base applies its hooks to every kind of handler, and the
service interceptor wraps every kind of server-streaming handler: on a real
grpc server, the wiring. The base's rules called directly (an abort in the
prologue, an error mapped by on_error, a cancelled stream's epilogue, which
interceptors see the messages, a refused handler of each kind) are in
tests/unit/test_api_interception.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from nexus_grpc.api.interceptors import ServiceInterceptor
from tests.interception_support import Recording


async def test_a_stream_written_with_context_write_passes_through():
    # grpc_health's aio Watch streams with context.write() and returns None.
    server = grpc.aio.server(interceptors=[ServiceInterceptor(max_concurrent=8)])
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        await servicer.set("svc", health_pb2.HealthCheckResponse.SERVING)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service="svc"), timeout=10
            )
            first = await call.read()
            assert first.status == health_pb2.HealthCheckResponse.SERVING
            await servicer.set("svc", health_pb2.HealthCheckResponse.NOT_SERVING)
            second = await call.read()
            assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
            call.cancel()
    finally:
        await server.stop(None)


# --- the base every interceptor of ours builds on ------------------------------------

SERVICE = "test.Kinds"


async def _unary_unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    if request == b"boom":
        raise ValueError("boom")
    return request.upper()


async def _unary_stream(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    for part in request.split(b" "):
        if part == b"wait":
            await asyncio.sleep(30)
        yield part


async def _stream_unary(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
    return b"+".join([r async for r in requests])


async def _stream_stream(
    requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
) -> AsyncIterator[bytes]:
    async for request in requests:
        yield request.upper()


def _kinds_handler() -> grpc.GenericRpcHandler:
    # No (de)serializers: the messages are the bytes on the wire.
    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "UnaryUnary": grpc.unary_unary_rpc_method_handler(_unary_unary),
            "UnaryStream": grpc.unary_stream_rpc_method_handler(_unary_stream),
            "StreamUnary": grpc.stream_unary_rpc_method_handler(_stream_unary),
            "StreamStream": grpc.stream_stream_rpc_method_handler(_stream_stream),
        },
    )


@contextlib.asynccontextmanager
async def _serving(*interceptors: grpc.aio.ServerInterceptor) -> AsyncIterator[grpc.aio.Channel]:
    server = grpc.aio.server(interceptors=list(interceptors))
    server.add_generic_rpc_handlers((_kinds_handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        await server.stop(None)


async def _requests(*items: bytes) -> AsyncIterator[bytes]:
    for item in items:
        yield item


async def test_the_base_runs_each_hook_around_every_kind_of_handler():
    recording = Recording()
    async with _serving(recording) as channel:
        path = f"/{SERVICE}/"
        assert await channel.unary_unary(path + "UnaryUnary")(b"ab", timeout=10) == b"AB"
        stream = channel.unary_stream(path + "UnaryStream")(b"a b", timeout=10)
        assert [item async for item in stream] == [b"a", b"b"]
        answer = await channel.stream_unary(path + "StreamUnary")(_requests(b"a", b"b"), timeout=10)
        assert answer == b"a+b"
        bidi = channel.stream_stream(path + "StreamStream")(_requests(b"a", b"b"), timeout=10)
        assert [item async for item in bidi] == [b"A", b"B"]
    assert recording.seen == [
        ("UnaryUnary", "prologue", "b'ab'"),
        ("UnaryUnary", "response", "b'AB'"),
        ("UnaryUnary", "epilogue", "False"),
        ("UnaryStream", "prologue", "b'a b'"),
        ("UnaryStream", "response", "b'a'"),
        ("UnaryStream", "response", "b'b'"),
        ("UnaryStream", "epilogue", "False"),
        ("StreamUnary", "prologue", "None"),
        ("StreamUnary", "request", "b'a'"),
        ("StreamUnary", "request", "b'b'"),
        ("StreamUnary", "response", "b'a+b'"),
        ("StreamUnary", "epilogue", "False"),
        ("StreamStream", "prologue", "None"),
        ("StreamStream", "request", "b'a'"),
        ("StreamStream", "response", "b'A'"),
        ("StreamStream", "request", "b'b'"),
        ("StreamStream", "response", "b'B'"),
        ("StreamStream", "epilogue", "False"),
    ]
