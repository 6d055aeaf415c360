"""Stand-ins for driving the interceptor base (rpc/interception.py), shared by
the tiers that test it: ``Recording``, an interceptor that writes down every
hook it is given; ``Quiet``, one with no hooks of its own; ``Details``, what
grpc hands ``intercept_service``, so the unit tests can call a wrapped handler
directly (with tests/unit/grpc_contexts.py's context); ``items``, a request
stream.

Not a test module: tests/unit/test_api_interception.py and
test_rpc_interception_rules.py call handlers with these directly,
tests/e2e/api/test_interceptors.py puts ``Recording`` on a real grpc server.
It imports no store, so the unit tier may import it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio

from nexus_grpc.rpc.interception import HandlerInterceptor


class Recording(HandlerInterceptor[str]):
    """Writes down every hook it is given, by method name, in order. A request
    of ``b"refuse"`` is aborted in the prologue; an error is answered by
    aborting with DATA_LOSS, unless ``answer_errors`` is False (then the
    handler's error is raised as it was)."""

    def __init__(self, *, answer_errors: bool = True) -> None:
        self.seen: list[tuple[str, ...]] = []
        self.answer_errors = answer_errors

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
        if self.answer_errors:
            await context.abort(grpc.StatusCode.DATA_LOSS, f"mapped: {exc}")

    def epilogue(self, call: str, context: grpc.aio.ServicerContext, cancelled: bool) -> None:
        self.seen.append((call, "epilogue", str(cancelled)))


class Quiet(HandlerInterceptor[None]):
    """No hooks of its own: the messages pass without a hook call each."""


class Details:
    """The call details grpc hands ``intercept_service``."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


async def items(*values: bytes) -> AsyncIterator[bytes]:
    """A request stream of ``values``."""
    for value in values:
        yield value
