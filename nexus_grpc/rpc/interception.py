"""The one way our server interceptors act around a call.

grpc.aio gives an interceptor the method's handler and expects one back; to
act around the call it must build a new handler of the same kind around the
servicer's function, keeping the (de)serializers, once for each of the four
kinds (unary-unary, unary-stream, stream-unary, stream-stream). That is done
here, once, by ``HandlerInterceptor``: an interceptor of ours (the shutdown
gate, auth, the service interceptor) states what it does before and after a
call, with each message and with an unexpected exception, and the base runs
those hooks around a handler of whichever kind. The order the interceptors
run in is set in one place, ``nexus_grpc.server.interceptor_chain``.

We serve unary-unary, unary-stream and stream-unary (client-streaming:
ImportEpisodes) methods; reflection is bidi-streaming, and each interceptor
says in its ``intercept`` whether it wraps, passes or refuses such a handler.

grpc-interceptor's ``AsyncServerInterceptor`` is not used: it cannot swap the
request deserializer (undecodable requests become INVALID_ARGUMENT), nor leave
a refused call's request unread.

Every call goes through here three times, so the wrappers are plain closures
(no context manager objects), and the per-message hooks cost nothing unless an
interceptor defines them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from inspect import isasyncgen, isawaitable
from typing import Any, Generic, TypeVar

import grpc

#: What an interceptor keeps about one call, from ``intercept`` to its hooks.
CallT = TypeVar("CallT")

_KEEP: Any = object()

#: By (request streaming, response streaming): the handler's field that holds
#: the servicer's function, and grpc's constructor of such a handler.
_KINDS: dict[tuple[bool, bool], tuple[str, Callable[..., grpc.RpcMethodHandler]]] = {
    (False, False): ("unary_unary", grpc.unary_unary_rpc_method_handler),
    (False, True): ("unary_stream", grpc.unary_stream_rpc_method_handler),
    (True, False): ("stream_unary", grpc.stream_unary_rpc_method_handler),
    (True, True): ("stream_stream", grpc.stream_stream_rpc_method_handler),
}


def rebuild(
    handler: grpc.RpcMethodHandler,
    behaviour: Callable[..., Any],
    request_deserializer: Callable[[bytes], Any] | None = _KEEP,
) -> grpc.RpcMethodHandler:
    """A handler of ``handler``'s kind running ``behaviour`` in place of its function.

    The response serializer is kept; so is the request deserializer unless one
    is given (``None``: the request is left as bytes, for a call refused before
    it is read).
    """
    deserializer = (
        handler.request_deserializer if request_deserializer is _KEEP else request_deserializer
    )
    build = _KINDS[bool(handler.request_streaming), bool(handler.response_streaming)][1]
    return build(
        behaviour,
        request_deserializer=deserializer,
        response_serializer=handler.response_serializer,
    )


#: What a refused client stream may still send before the refusal, and for how
#: long: see refused().
REFUSAL_DRAIN_BYTES = 4 * 1024 * 1024
REFUSAL_DRAIN_S = 2.0


async def drain(requests: AsyncIterator[Any], max_bytes: int, max_seconds: float) -> None:
    """Read and drop what a client is still streaming, until it half-closes or
    ``max_bytes`` of messages or ``max_seconds`` have passed, whichever is first.

    A call that ends while its client is still writing is reported by grpc's
    Python client as INTERNAL "Internal error from Core" when a write loses the
    race with the status, which hides the reason (an admin-only RPC, a bad
    record). Ending it after the client has sent everything gives it the status."""
    read = 0
    try:
        async with asyncio.timeout(max_seconds):
            async for message in requests:
                read += len(message) if isinstance(message, bytes) else message.ByteSize()
                if read > max_bytes:
                    return
    except (TimeoutError, grpc.RpcError, asyncio.InvalidStateError):
        return  # the client went away, or took too long: the refusal goes out anyway


def refused(
    handler: grpc.RpcMethodHandler,
    abort: Callable[[grpc.aio.ServicerContext], Awaitable[None]],
) -> grpc.RpcMethodHandler:
    """A handler of ``handler``'s kind whose every call only runs ``abort``
    (which ends it, with ``context.abort``); the request is never deserialised.
    A client stream is drained first, within bounds (drain())."""
    if handler.request_streaming and not handler.response_streaming:

        async def stream_in(
            requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
        ) -> Any:
            await drain(requests, REFUSAL_DRAIN_BYTES, REFUSAL_DRAIN_S)
            await abort(context)

        return rebuild(handler, stream_in, request_deserializer=None)
    if handler.response_streaming:

        async def stream(_request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await abort(context)
            yield  # pragma: no cover - makes this an async generator

        return rebuild(handler, stream, request_deserializer=None)

    async def unary(_request: Any, context: grpc.aio.ServicerContext) -> Any:
        await abort(context)

    return rebuild(handler, unary, request_deserializer=None)


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


class HandlerInterceptor(grpc.aio.ServerInterceptor, Generic[CallT]):
    """Base of our interceptors.

    ``intercept`` gets the method's handler (never None) and the call details,
    and returns the handler to run: ``self.wrap(handler, call)`` to run this
    interceptor's hooks around it, ``handler`` itself to stay out of the call,
    or ``refused(handler, ...)``. ``call`` is whatever the hooks need to know
    about the call (its method, its caller, ...); they get it back.

    The hooks, each stated once for every kind of handler:

    - ``prologue``: before the servicer's function runs. It gets the request
      when there is one request message, ``None`` when the requests stream.
      It may end the call with ``context.abort``; ``epilogue`` runs even then.
    - ``epilogue``: once the call is over, however it ended (``cancelled``:
      by the client, the deadline or shutdown).
    - ``on_error``: an exception from anything after ``prologue`` began that is
      neither an abort nor a cancellation; it is re-raised unless this aborts.
    - ``on_request``: each streamed request message, as the servicer reads it.
    - ``on_response``: the one answer, or each streamed one before it is sent.

    Building the handler runs nothing yet: the hooks run when the call does.
    """

    #: Whether a subclass defines ``on_request`` / ``on_response`` /
    #: ``epilogue``: when it does not, nothing is called for it (the messages
    #: pass without a call per message).
    _sees_requests = False
    _sees_responses = False
    _has_epilogue = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._sees_requests = cls.on_request is not HandlerInterceptor.on_request
        cls._sees_responses = cls.on_response is not HandlerInterceptor.on_response
        cls._has_epilogue = cls.epilogue is not HandlerInterceptor.epilogue

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
        """By default every handler is wrapped, and the hooks get the call details."""
        return self.wrap(handler, details)

    # --- the hooks ---------------------------------------------------------------

    async def prologue(self, call: CallT, context: grpc.aio.ServicerContext, request: Any) -> None:
        pass

    def epilogue(self, call: CallT, context: grpc.aio.ServicerContext, cancelled: bool) -> None:
        pass

    async def on_error(
        self, call: CallT, context: grpc.aio.ServicerContext, exc: Exception
    ) -> None:
        pass

    async def on_request(
        self, call: CallT, context: grpc.aio.ServicerContext, request: Any
    ) -> None:
        pass

    async def on_response(
        self, call: CallT, context: grpc.aio.ServicerContext, response: Any
    ) -> None:
        pass

    # --- applying them -----------------------------------------------------------

    def wrap(
        self,
        handler: grpc.RpcMethodHandler,
        call: CallT,
        *,
        request_deserializer: Callable[[bytes], Any] | None = _KEEP,
    ) -> grpc.RpcMethodHandler:
        """``handler`` with this interceptor's hooks around it, whatever its kind."""
        streamed, streams = bool(handler.request_streaming), bool(handler.response_streaming)
        field, build = _KINDS[streamed, streams]
        fn = getattr(handler, field)
        if streams:
            behaviour = self._streamed_answers(fn, call, streamed)
        else:
            behaviour = self._one_answer(fn, call, streamed)
        if request_deserializer is _KEEP:
            request_deserializer = handler.request_deserializer
        return build(
            behaviour,
            request_deserializer=request_deserializer,
            response_serializer=handler.response_serializer,
        )

    # The two frames below are one frame written twice: a coroutine (one
    # answer) and an async generator (streamed answers) cannot share a try
    # block except through a context manager object, made on every call.

    def _one_answer(
        self, fn: Callable[..., Any], call: CallT, streamed: bool
    ) -> Callable[..., Any]:
        """Unary-unary and stream-unary."""

        async def one_answer(request: Any, context: grpc.aio.ServicerContext) -> Any:
            cancelled = False
            try:
                if streamed:
                    await self.prologue(call, context, None)
                    if self._sees_requests:
                        request = self._requests(call, context, request)
                else:
                    await self.prologue(call, context, request)
                response = await fn(request, context)
                if self._sees_responses:
                    await self.on_response(call, context, response)
                return response
            except BaseException as exc:
                cancelled = await self._raised(call, context, exc)
                raise
            finally:
                if self._has_epilogue:
                    self.epilogue(call, context, cancelled)

        return one_answer

    def _streamed_answers(
        self, fn: Callable[..., Any], call: CallT, streamed: bool
    ) -> Callable[..., AsyncIterator[Any]]:
        """Unary-stream and stream-stream."""

        async def streamed_answers(
            request: Any, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            cancelled = False
            try:
                if streamed:
                    await self.prologue(call, context, None)
                    if self._sees_requests:
                        request = self._requests(call, context, request)
                else:
                    await self.prologue(call, context, request)
                result = fn(request, context)
                if not isasyncgen(result) and isawaitable(result):
                    # A handler that streams with context.write() and returns
                    # None (grpc_health's Watch does): nothing to iterate.
                    await result
                else:
                    async for item in result:
                        if self._sees_responses:
                            await self.on_response(call, context, item)
                        yield item
            except BaseException as exc:
                cancelled = await self._raised(call, context, exc)
                raise
            finally:
                if self._has_epilogue:
                    self.epilogue(call, context, cancelled)

        return streamed_answers

    def _requests(
        self, call: CallT, context: grpc.aio.ServicerContext, requests: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        async def seen() -> AsyncIterator[Any]:
            async for request in requests:
                await self.on_request(call, context, request)
                yield request

        return seen()

    async def _raised(
        self, call: CallT, context: grpc.aio.ServicerContext, exc: BaseException
    ) -> bool:
        """Whether the call was cancelled; ``on_error`` for an unexpected exception."""
        if isinstance(exc, asyncio.CancelledError):
            return True
        if isinstance(exc, Exception) and not isinstance(exc, grpc.aio.AbortError):
            await self.on_error(call, context, exc)
        return False
