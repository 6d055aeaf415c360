"""The interceptor base (rpc/interception.py) around the kinds of handler the
other unit file does not drive: each streamed request and each streamed answer
seen in order, a handler that writes with ``context.write``, an error from a
stream, a wrapped handler keeping or swapping its (de)serializers, an unknown
method passing through, an interceptor with no hooks leaving the messages
untouched, and an undecodable request described in our words. Called directly
with a stand-in context (tests/unit/grpc_contexts.py) and the recording
interceptor of tests/interception_support.py; no server, no channel.

The prologue's abort, an error mapped by ``on_error``, a cancelled stream, the
refused handlers and the bounded drain are in tests/unit/test_api_interception.py;
every hook on a real grpc server in tests/e2e/api/test_interceptors.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from nexus_grpc.rpc.interception import HandlerInterceptor, Undecodable
from tests.interception_support import Details, Quiet, Recording, items
from tests.unit.grpc_contexts import AbortingContext


async def _joined(requests: AsyncIterator[bytes], context: Any) -> bytes:
    return b"+".join([r async for r in requests])


async def _echoed(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
    async for request in requests:
        yield request.upper()


async def _counted(request: bytes, context: Any) -> AsyncIterator[bytes]:
    for i in range(int(request)):
        yield str(i).encode()


def _wrapped(interceptor: HandlerInterceptor[Any], handler: grpc.RpcMethodHandler, method: str):
    return interceptor.intercept(handler, Details(f"/test.Kinds/{method}"))


async def test_each_streamed_request_is_seen_as_the_servicer_reads_it():
    recording = Recording()
    handler = _wrapped(recording, grpc.stream_unary_rpc_method_handler(_joined), "In")
    assert await handler.stream_unary(items(b"x", b"y"), AbortingContext()) == b"x+y"
    assert recording.seen == [
        ("In", "prologue", "None"),  # a client stream: no one request to show
        ("In", "request", "b'x'"),
        ("In", "request", "b'y'"),
        ("In", "response", "b'x+y'"),
        ("In", "epilogue", "False"),
    ]


async def test_each_streamed_answer_is_seen_before_it_is_sent():
    recording = Recording()
    handler = _wrapped(recording, grpc.unary_stream_rpc_method_handler(_counted), "Out")
    assert [item async for item in handler.unary_stream(b"2", AbortingContext())] == [b"0", b"1"]
    assert recording.seen == [
        ("Out", "prologue", "b'2'"),
        ("Out", "response", "b'0'"),
        ("Out", "response", "b'1'"),
        ("Out", "epilogue", "False"),
    ]


async def test_both_ways_each_message_is_seen_in_turn():
    recording = Recording()
    handler = _wrapped(recording, grpc.stream_stream_rpc_method_handler(_echoed), "Both")
    answers = [item async for item in handler.stream_stream(items(b"a", b"b"), AbortingContext())]
    assert answers == [b"A", b"B"]
    assert [hook for _, hook, _ in recording.seen] == [
        "prologue",
        "request",
        "response",
        "request",
        "response",
        "epilogue",
    ]


async def test_a_stream_written_with_context_write_is_awaited_not_iterated():
    async def writes(request: bytes, context: AbortingContext) -> None:
        await context.write(b"one")
        await context.write(b"two")

    recording = Recording()
    handler = _wrapped(recording, grpc.unary_stream_rpc_method_handler(writes), "Watch")
    context = AbortingContext()
    assert [item async for item in handler.unary_stream(b"w", context)] == []
    assert context.written == [b"one", b"two"]
    assert recording.seen[-1] == ("Watch", "epilogue", "False")


async def test_an_error_from_a_stream_goes_to_on_error_and_is_raised_when_not_answered():
    async def breaks(request: bytes, context: Any) -> AsyncIterator[bytes]:
        yield b"first"
        raise KeyError("gone")

    recording = Recording(answer_errors=False)
    handler = _wrapped(recording, grpc.unary_stream_rpc_method_handler(breaks), "Breaks")
    got: list[bytes] = []
    with pytest.raises(KeyError):
        async for item in handler.unary_stream(b"r", AbortingContext()):
            got.append(item)
    assert got == [b"first"]
    assert recording.seen[-2:] == [("Breaks", "error", "KeyError"), ("Breaks", "epilogue", "False")]


def test_a_wrapped_handler_keeps_its_serializers_unless_given_a_deserializer():
    def deserialize(data: bytes) -> str:
        return data.decode()

    def serialize(value: str) -> bytes:
        return value.encode()

    def tolerant(data: bytes) -> str:
        return "tolerant"

    handler = grpc.unary_unary_rpc_method_handler(_joined, deserialize, serialize)
    kept = Quiet().wrap(handler, None)
    assert kept.request_deserializer is deserialize
    assert kept.response_serializer is serialize
    swapped = Quiet().wrap(handler, None, request_deserializer=tolerant)
    assert swapped.request_deserializer is tolerant
    assert swapped.response_serializer is serialize
    assert Quiet().wrap(handler, None, request_deserializer=None).request_deserializer is None


async def test_an_unknown_method_passes_through_and_a_known_one_is_wrapped():
    async def unknown(details: Any) -> None:
        return None

    recording = Recording()
    assert await recording.intercept_service(unknown, Details("/test.Kinds/Nope")) is None

    async def known(details: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_stream_rpc_method_handler(_counted)

    handler = await recording.intercept_service(known, Details("/test.Kinds/Count"))
    assert [item async for item in handler.unary_stream(b"1", AbortingContext())] == [b"0"]
    assert recording.seen[0] == ("Count", "prologue", "b'1'")


async def test_an_interceptor_without_hooks_hands_the_messages_on_untouched():
    seen: list[Any] = []

    async def reads(requests: Any, context: Any) -> bytes:
        seen.append(requests)
        return b"done"

    handler = grpc.stream_unary_rpc_method_handler(reads)
    wrapped = await Quiet().intercept_service(_async(handler), Details("/test.Kinds/In"))
    requests = items(b"x")
    assert await wrapped.stream_unary(requests, AbortingContext()) == b"done"
    assert seen == [requests]  # the client's stream itself, not one read through a hook


def _async(handler: grpc.RpcMethodHandler):
    async def continuation(details: Any) -> grpc.RpcMethodHandler:
        return handler

    return continuation


def test_an_undecodable_request_is_described_in_our_words():
    refusal = Undecodable("nexus.memory.v1.CreateEpisodeRequest", ValueError("bad wire type"))
    assert refusal.message == (
        "the request is not a valid nexus.memory.v1.CreateEpisodeRequest: bad wire type"
        " (check that client and server use the same .proto)"
    )


def test_an_undecodable_request_without_a_reason_is_named_by_its_error_and_cut():
    class DecodeError(Exception):
        pass

    assert ": DecodeError (check" in Undecodable("T", DecodeError()).message
    long = Undecodable("T", ValueError("x" * 500)).message
    assert "x" * 200 + " (check" in long and "x" * 201 not in long
