"""The one way our server interceptors wrap a method handler.

grpc.aio gives an interceptor the method's handler and expects one back; to
act around the call it must build a new handler of the same kind around the
servicer's function, keeping the (de)serializers. Every interceptor of ours
(the shutdown gate, auth, the service interceptor) does that through
``HandlerInterceptor`` and ``rewrap``. The order they run in is set in one
place, ``nexus_grpc.server.interceptor_chain``.

We serve unary-unary, unary-stream and stream-unary (client-streaming:
ImportEpisodes) methods; reflection is bidi-streaming and each interceptor
says what it does with such a handler.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

#: The servicer's function for a unary-unary method, and for a unary-stream one.
UnaryFn = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
StreamFn = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]
#: A stream-unary method's: it takes the async iterator of the caller's messages.
ClientStreamFn = Callable[[AsyncIterator[Any], grpc.aio.ServicerContext], Awaitable[Any]]

_KEEP: Any = object()


def rewrap(
    handler: grpc.RpcMethodHandler,
    *,
    unary: UnaryFn | None = None,
    stream: StreamFn | None = None,
    client_stream: ClientStreamFn | None = None,
    request_deserializer: Callable[[bytes], Any] | None = _KEEP,
) -> grpc.RpcMethodHandler:
    """A handler running ``stream`` in place of a unary-stream method's
    function, ``client_stream`` in place of a stream-unary one's, else
    ``unary`` (unary-unary, or any other kind being refused).

    The response serializer is kept; so is the request deserializer unless
    one is given (``None``: the request is left as bytes, for a call refused
    before it is read).
    """
    deserializer = (
        handler.request_deserializer if request_deserializer is _KEEP else request_deserializer
    )
    if handler.unary_stream:
        assert stream is not None
        return grpc.unary_stream_rpc_method_handler(
            stream,
            request_deserializer=deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.stream_unary:
        assert client_stream is not None
        return grpc.stream_unary_rpc_method_handler(
            client_stream,
            request_deserializer=deserializer,
            response_serializer=handler.response_serializer,
        )
    assert unary is not None
    return grpc.unary_unary_rpc_method_handler(
        unary,
        request_deserializer=deserializer,
        response_serializer=handler.response_serializer,
    )


def is_unary_request(handler: grpc.RpcMethodHandler) -> bool:
    """Unary-unary or unary-stream: one request message."""
    return bool(handler.unary_unary or handler.unary_stream)


def is_wrappable(handler: grpc.RpcMethodHandler) -> bool:
    """The kinds ``rewrap`` can wrap: all but bidi-streaming (reflection)."""
    return bool(handler.unary_unary or handler.unary_stream or handler.stream_unary)


class Undecodable:
    """A request whose bytes are not a valid message of the method's type.

    grpc answers a deserializer's exception with UNKNOWN and the exception's
    text; the client sent something wrong, so it is INVALID_ARGUMENT, said
    in our words. The service interceptor's tolerant deserializer hands this
    marker on instead of a request: a unary call is refused with its
    message, and a client stream's item reaches the servicer as it is, which
    reports it as that item's error (ImportEpisodes goes on with the rest).
    """

    def __init__(self, type_name: str, error: BaseException) -> None:
        reason = str(error) or type(error).__name__
        self.message = (
            f"the request is not a valid {type_name}: {reason[:200]}"
            " (check that client and server use the same .proto)"
        )


class HandlerInterceptor(grpc.aio.ServerInterceptor):
    """Base of our interceptors: ``intercept`` gets the method's handler (never
    None) and the call details, and returns the handler to run.

    Building the handler runs nothing yet: the wrappers run when the call does.
    """

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        return self.intercept(handler, details)

    def intercept(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        raise NotImplementedError
