"""The interceptor base (rpc/interception.py), called directly: the hooks a
wrapped handler runs when the prologue aborts, when the servicer raises or
is cancelled, which interceptors see each message, a refused handler of
each kind, and the bounded drain of a refused client stream. A context that
records the abort stands in for grpc's (tests/unit/grpc_contexts.py; the
recording interceptor is tests/interception_support.py's); no server, no
channel.

tests/e2e/api/test_interceptors.py keeps the wiring: every hook around each
of the four kinds of handler on a real grpc server, and a stream written
with ``context.write``; tests/e2e/api/test_client_streaming.py a refused
import read to its end over the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest

from nexus_grpc.rpc.interception import drain, refused
from tests.interception_support import Details, Quiet, Recording, items
from tests.unit.grpc_contexts import Aborted, AbortingContext


async def _unary_unary(request: bytes, context: Any) -> bytes:
    if request == b"boom":
        raise ValueError("boom")
    return request.upper()


def test_messages_are_only_seen_by_interceptors_that_ask_to_see_them():
    assert (Quiet._sees_requests, Quiet._sees_responses) == (False, False)
    assert (Recording._sees_requests, Recording._sees_responses) == (True, True)


async def test_an_abort_in_the_prologue_ends_the_call_and_the_epilogue_still_runs():
    recording = Recording()
    handler = recording.intercept(
        grpc.unary_unary_rpc_method_handler(_unary_unary), Details("/test.Kinds/UnaryUnary")
    )
    context = AbortingContext()
    with pytest.raises(Aborted):
        await handler.unary_unary(b"refuse", context)
    assert (context.code, context.message) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "refused in the prologue",
    )
    # An abort is the interceptor's own answer, not an error to map.
    assert recording.seen == [
        ("UnaryUnary", "prologue", "b'refuse'"),
        ("UnaryUnary", "epilogue", "False"),
    ]


async def test_an_unexpected_exception_goes_to_on_error_which_may_answer_for_it():
    recording = Recording()
    handler = recording.intercept(
        grpc.unary_unary_rpc_method_handler(_unary_unary), Details("/test.Kinds/UnaryUnary")
    )
    context = AbortingContext()
    with pytest.raises(Aborted):
        await handler.unary_unary(b"boom", context)
    assert (context.code, context.message) == (grpc.StatusCode.DATA_LOSS, "mapped: boom")
    assert recording.seen[1:] == [
        ("UnaryUnary", "error", "ValueError"),
        ("UnaryUnary", "epilogue", "False"),
    ]


async def test_a_stream_the_client_cancels_ends_with_a_cancelled_epilogue():
    recording = Recording()
    waiting = asyncio.Event()

    async def _unary_stream(request: bytes, context: Any) -> AsyncIterator[bytes]:
        yield b"a"
        waiting.set()
        await asyncio.Event().wait()  # until the call is cancelled
        yield b"never"

    handler = recording.intercept(
        grpc.unary_stream_rpc_method_handler(_unary_stream), Details("/test.Kinds/UnaryStream")
    )
    got: list[bytes] = []

    async def read() -> None:
        async for item in handler.unary_stream(b"a wait", AbortingContext()):
            got.append(item)

    task = asyncio.ensure_future(read())
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert got == [b"a"]
    assert recording.seen[-1] == ("UnaryStream", "epilogue", "True")
    assert ("UnaryStream", "error", "CancelledError") not in recording.seen


def _never_read(_data: bytes) -> bytes:
    raise AssertionError("a refused call's request is never deserialised")


async def _no(context: Any) -> None:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, "no")


async def _bidi(requests: Any, context: Any) -> AsyncIterator[bytes]:
    yield b"never"


async def _stream_in(requests: Any, context: Any) -> bytes:
    return b"never"


async def _stream_out(request: Any, context: Any) -> AsyncIterator[bytes]:
    yield b"never"


async def test_a_refused_handler_of_each_kind_aborts_without_reading_the_request():
    kinds = {
        "unary_unary": grpc.unary_unary_rpc_method_handler(_unary_unary, _never_read),
        "unary_stream": grpc.unary_stream_rpc_method_handler(_stream_out, _never_read),
        "stream_unary": grpc.stream_unary_rpc_method_handler(_stream_in, _never_read),
        "stream_stream": grpc.stream_stream_rpc_method_handler(_bidi, _never_read),
    }
    for kind, handler in kinds.items():
        refusal = refused(handler, _no)
        # The kind is kept, the request is left as the client's bytes.
        assert (refusal.request_streaming, refusal.response_streaming) == (
            handler.request_streaming,
            handler.response_streaming,
        ), kind
        assert refusal.request_deserializer is None, kind
        context = AbortingContext()
        fn = getattr(refusal, kind)
        request = items(b"x") if handler.request_streaming else b"x"
        with pytest.raises(Aborted):
            if handler.response_streaming:
                [item async for item in fn(request, context)]
            else:
                await fn(request, context)
        assert (context.code, context.message) == (grpc.StatusCode.UNAUTHENTICATED, "no"), kind


async def test_draining_a_refused_stream_is_bounded_in_bytes_and_time():
    """Moved as it was from tests/e2e/api/test_client_streaming.py."""
    read: list[int] = []

    async def endless(size: int):
        while True:
            read.append(size)
            yield b"x" * size

    await drain(endless(1000), max_bytes=10_000, max_seconds=30)
    assert len(read) == 11  # stopped at the first message past the bound

    async def silent():
        await asyncio.Event().wait()  # a client that sends nothing and never closes
        yield b""

    await asyncio.wait_for(drain(silent(), max_bytes=10_000, max_seconds=0.05), 5)
