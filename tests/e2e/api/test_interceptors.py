"""The interceptor base applies its hooks to every kind of handler, and the
service interceptor wraps every kind of server-streaming handler."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from nexus_grpc.api.interceptors import ServiceInterceptor
from nexus_grpc.rpc.interception import HandlerInterceptor, rebuild, refused


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


class Recording(HandlerInterceptor[str]):
    """Writes down every hook it is given, by method name."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ...]] = []
        # The client has its status once the abort is sent; the epilogue runs
        # after, in the handler's own task, which a server stopped at once
        # would cancel: a test waits on this before it stops the server.
        self.ended = asyncio.Event()

    def intercept(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        return self.wrap(handler, details.method.rsplit("/", 1)[-1])

    async def prologue(self, call: str, context: grpc.aio.ServicerContext, request: Any) -> None:
        self.seen.append((call, "prologue", repr(request)))
        if request == b"refuse":
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "refused in the prologue")

    async def on_request(self, call: str, context: grpc.aio.ServicerContext, request: Any) -> None:
        self.seen.append((call, "request", repr(request)))

    async def on_response(
        self, call: str, context: grpc.aio.ServicerContext, response: Any
    ) -> None:
        self.seen.append((call, "response", repr(response)))

    async def on_error(self, call: str, context: grpc.aio.ServicerContext, exc: Exception) -> None:
        self.seen.append((call, "error", type(exc).__name__))
        await context.abort(grpc.StatusCode.DATA_LOSS, f"mapped: {exc}")

    def epilogue(self, call: str, context: grpc.aio.ServicerContext, cancelled: bool) -> None:
        self.seen.append((call, "epilogue", str(cancelled)))
        self.ended.set()


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


async def _failed_unary_call(
    interceptor: grpc.aio.ServerInterceptor, request: bytes
) -> grpc.aio.AioRpcError:
    async with _serving(interceptor) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await channel.unary_unary(f"/{SERVICE}/UnaryUnary")(request, timeout=10)
        if isinstance(interceptor, Recording):
            await asyncio.wait_for(interceptor.ended.wait(), 10)
    return failed.value


async def test_an_abort_in_the_prologue_ends_the_call_and_the_epilogue_still_runs():
    recording = Recording()
    refused_call = await _failed_unary_call(recording, b"refuse")
    assert refused_call.code() == grpc.StatusCode.FAILED_PRECONDITION
    # An abort is the interceptor's own answer, not an error to map.
    assert recording.seen == [
        ("UnaryUnary", "prologue", "b'refuse'"),
        ("UnaryUnary", "epilogue", "False"),
    ]


async def test_an_unexpected_exception_goes_to_on_error_which_may_answer_for_it():
    recording = Recording()
    failed = await _failed_unary_call(recording, b"boom")
    assert (failed.code(), failed.details()) == (
        grpc.StatusCode.DATA_LOSS,
        "mapped: boom",
    )
    assert recording.seen[1:] == [
        ("UnaryUnary", "error", "ValueError"),
        ("UnaryUnary", "epilogue", "False"),
    ]


async def test_a_stream_the_client_cancels_ends_with_a_cancelled_epilogue():
    recording = Recording()
    ended = asyncio.Event()
    epilogue = recording.epilogue

    def noted(call: str, context: grpc.aio.ServicerContext, cancelled: bool) -> None:
        epilogue(call, context, cancelled)
        ended.set()

    recording.epilogue = noted  # type: ignore[method-assign]
    async with _serving(recording) as channel:
        stream = channel.unary_stream(f"/{SERVICE}/UnaryStream")(b"a wait", timeout=10)
        assert await stream.read() == b"a"
        stream.cancel()
        await asyncio.wait_for(ended.wait(), 10)
    assert recording.seen[-1] == ("UnaryStream", "epilogue", "True")


class Quiet(HandlerInterceptor[None]):
    """Only a prologue: the messages pass without a hook call each."""


def test_messages_are_only_seen_by_interceptors_that_ask_to_see_them():
    assert (Quiet._sees_requests, Quiet._sees_responses) == (False, False)
    assert (Recording._sees_requests, Recording._sees_responses) == (True, True)


async def test_a_refused_handler_of_each_kind_aborts_without_reading_the_request():
    def undecodable(_data: bytes) -> bytes:
        raise AssertionError("a refused call's request is never deserialised")

    class Refusing(HandlerInterceptor[None]):
        def intercept(
            self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
        ) -> grpc.RpcMethodHandler:
            async def abort(context: grpc.aio.ServicerContext) -> None:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "no")

            # As if the request could not be parsed: a refusal that read it
            # would fail with UNKNOWN instead.
            fn = handler.unary_unary or handler.unary_stream or handler.stream_unary
            unreadable = rebuild(handler, fn or handler.stream_stream, undecodable)
            return refused(unreadable, abort)

    async with _serving(Refusing()) as channel:
        path = f"/{SERVICE}/"
        calls = [
            channel.unary_unary(path + "UnaryUnary")(b"x", timeout=10),
            channel.unary_stream(path + "UnaryStream")(b"x", timeout=10),
            channel.stream_unary(path + "StreamUnary")(_requests(b"x"), timeout=10),
            channel.stream_stream(path + "StreamStream")(_requests(b"x"), timeout=10),
        ]
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as refused_call:
                if hasattr(call, "__aiter__"):
                    [item async for item in call]
                else:
                    await call
            assert refused_call.value.code() == grpc.StatusCode.UNAUTHENTICATED
