"""Cross-cutting behaviour for every RPC: request ids, access logs, error
mapping and the concurrency caps (the server's, and each API key's).

One interceptor wraps each method handler (unary and streaming alike), so a
servicer only ever raises domain exceptions: each goes out as its status code,
its message and its details (rpc/error_status.py).  Unknown exceptions become
INTERNAL with a generic message; the traceback goes to the log with the
request id, never to the client.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import Message

from nexus_grpc.errors import ErrorInfo, NexusError, QuotaViolation
from nexus_grpc.rpc.auth import current_principal
from nexus_grpc.rpc.error_status import abort, abort_with_error
from nexus_grpc.rpc.interception import HandlerInterceptor, Undecodable
from nexus_grpc.rpc.requests import RequestObserver, request_id_var
from nexus_grpc.runtime import deadlines, tracing

log = logging.getLogger("nexus_grpc.access")

#: A client's x-request-id is echoed in trailers and written into every log
#: line of its call: it must be a short token of visible ASCII, or it could
#: forge log entries or bloat every line. Anything else is replaced.
REQUEST_ID = re.compile(r"[!-~]{1,128}")

# Health and reflection must answer even when the server is saturated.
UNCAPPED_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None
    type_name = getattr(getattr(deserializer, "__self__", None), "__name__", "message")

    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        # DecodeError, bad UTF-8, RecursionError for absurd nesting: all the
        # client's bytes, never our fault.
        except Exception as exc:
            return Undecodable(type_name, exc)

    return decode


class _Call:
    """What the service interceptor keeps about one call (one is made on every
    call: a plain slotted class)."""

    __slots__ = (
        "method",
        "capped",
        "incoming",
        "streams",
        "started",
        "span",
        "held",
        "key",
        "tenant",
        "streaming",
    )

    def __init__(self, method: str, capped: bool, incoming: dict[str, Any], streams: bool) -> None:
        self.method = method
        self.capped = capped
        self.incoming = incoming
        self.streams = streams
        self.started = 0.0
        self.span: Any = None
        self.held = False  # a concurrency slot, to give back
        self.key: str | None = None  # the API key whose slot this call holds
        self.tenant: str | None = None  # the tenant whose slot this call holds
        self.streaming = False  # counted by the observer as an open stream


class KeySlots:
    """Calls each owner (an API key, or a tenant) has running, against one
    limit per owner.

    The server-wide cap alone let one key hold every slot (idle client
    streams cost it nothing) and lock every other key out; a cap per key,
    below the server's, leaves the rest to the others. A tenant holds many
    keys, so its keys together have a cap too, or four keys of one tenant
    fill the server. Keys are counted by ``Principal.key_id``: the key
    itself, not its name; tenants by name."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: dict[str, int] = {}

    def held(self, key: str) -> int:
        return self._held.get(key, 0)

    def full(self, key: str) -> bool:
        return 0 < self.limit <= self.held(key)

    def take(self, key: str) -> None:
        self._held[key] = self.held(key) + 1

    def give_back(self, key: str) -> None:
        left = self._held[key] - 1
        if left:
            self._held[key] = left
        else:
            del self._held[key]


class ServiceInterceptor(HandlerInterceptor[_Call]):
    def __init__(
        self,
        max_concurrent: int,
        observer: RequestObserver | None = None,
        max_message_bytes: int = 0,
        max_per_key: int = 0,
        max_per_tenant: int = 0,
    ) -> None:
        self._slots = asyncio.Semaphore(max_concurrent) if max_concurrent > 0 else None
        self._limit = max_concurrent
        #: Per API key (0: no per-key limit); only calls made with a key count.
        self._key_slots = KeySlots(max_per_key)
        #: Per tenant, all its keys together (0: no per-tenant limit).
        self._tenant_slots = KeySlots(max_per_tenant)
        self._observer = observer or RequestObserver()
        #: The send limit (0: unchecked). grpc refuses a larger response after
        #: the handler has returned, where this interceptor would have logged
        #: and counted the call as OK; checking here records the real status.
        self._max_bytes = max_message_bytes

    def intercept(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        if handler.stream_stream:
            return handler  # bidi-streaming (reflection): none of ours
        method = details.method
        capped = not method.startswith(UNCAPPED_PREFIXES)
        incoming = dict(details.invocation_metadata or ())
        call = _Call(method, capped, incoming, bool(handler.response_streaming))
        # A client stream's request iterator goes through as it is: an
        # undecodable item reaches the servicer as an ``Undecodable``, reported
        # per item.
        return self.wrap(
            handler, call, request_deserializer=_tolerant(handler.request_deserializer)
        )

    async def prologue(self, call: _Call, context: grpc.aio.ServicerContext, request: Any) -> None:
        call.started = time.perf_counter()
        rid = self._begin(call.incoming)
        if tracing.enabled():
            call.span = tracing.start_rpc(call.method, rid, call.incoming)
        deadlines.start(context.time_remaining())
        context.set_trailing_metadata((("x-request-id", rid),))
        if isinstance(request, Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        # Here, not before: a call refused at a cap is logged and counted too.
        if call.capped:
            await self._acquire(call, context)
        if call.streams:
            self._observer.stream_started(call.method)
            call.streaming = True

    async def on_response(
        self, call: _Call, context: grpc.aio.ServicerContext, response: Any
    ) -> None:
        if self._max_bytes <= 0 or not isinstance(response, Message):
            return
        size = response.ByteSize()
        if size > self._max_bytes:
            log.error(
                "%s: a %d-byte response exceeds --max-message-bytes (%d); not sent",
                call.method,
                size,
                self._max_bytes,
            )
            await abort(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"the response is {size} bytes, over the server's message limit of"
                f" {self._max_bytes} (--max-message-bytes); ask for less (a smaller"
                f" page_size or limit), or raise the limit on server and client",
                (
                    QuotaViolation(
                        "server",
                        f"bytes per message: at most {self._max_bytes}; this response has {size}",
                        quota_id="max-message-bytes",
                        quota_value=self._max_bytes,
                    ),
                    ErrorInfo("RESPONSE_TOO_LARGE", {"size": str(size)}),
                ),
            )

    async def on_error(
        self, call: _Call, context: grpc.aio.ServicerContext, exc: Exception
    ) -> None:
        if isinstance(exc, NexusError):
            # Its status code, its message (scrubbed of credentials) and its
            # details, as google.rpc error details.
            await abort_with_error(context, exc)
        log.error("unexpected error in %s", call.method, exc_info=exc)
        await context.abort(
            grpc.StatusCode.INTERNAL,
            f"internal error (request id {request_id_var.get()}); see the server log",
        )

    def epilogue(self, call: _Call, context: grpc.aio.ServicerContext, cancelled: bool) -> None:
        if call.streaming:
            self._observer.stream_ended(call.method)
        if call.held:
            assert self._slots is not None
            self._slots.release()
        if call.key is not None:
            self._key_slots.give_back(call.key)
        if call.tenant is not None:
            self._tenant_slots.give_back(call.tenant)
        code = grpc.StatusCode.CANCELLED if cancelled else (context.code() or grpc.StatusCode.OK)
        if isinstance(code, int):
            code = grpc.StatusCode.OK if code == 0 else grpc.StatusCode.UNKNOWN
        elapsed = time.perf_counter() - call.started
        self._observer.observe(call.method, code, elapsed)
        log.info("%s %s %.1fms", call.method, code.name, elapsed * 1000)
        if call.span is not None:
            tracing.end_rpc(call.span, code)

    def _begin(self, incoming: dict[str, Any]) -> str:
        given = incoming.get("x-request-id")
        if isinstance(given, str) and REQUEST_ID.fullmatch(given):
            request_id_var.set(given)
            return given
        rid = uuid.uuid4().hex[:16]
        request_id_var.set(rid)
        if given:
            # The client's value never reaches the log as it is: only its size
            # and a safe, cut-down rendering of it.
            shown = ascii(given if isinstance(given, str) else bytes(given))[:60]
            log.warning(
                "x-request-id replaced by %s: the client sent %d characters that are not"
                " a token of 1 to 128 visible ASCII characters (%s)",
                rid,
                len(given),
                shown,
            )
        return rid

    async def _acquire(self, call: _Call, context: grpc.aio.ServicerContext) -> None:
        """Takes the call's slots: its key's first (so a key at its own limit
        is told so, whatever the server's load), then the server's; refuses
        with RESOURCE_EXHAUSTED naming the limit it met."""
        principal = current_principal()  # bound by the auth interceptor; None: auth off
        keys = self._key_slots
        if principal is not None and keys.limit > 0:
            if keys.full(principal.key_id):
                await abort(
                    context,
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"API key {principal.name!r} already has {keys.held(principal.key_id)}"
                    " calls running, the limit for one key (streams count until they end);"
                    " retry with backoff once some finish, or raise the limit with"
                    " --max-concurrent-rpcs-per-key / NEXUS_MAX_CONCURRENT_RPCS_PER_KEY"
                    f" (now {keys.limit})",
                    (
                        QuotaViolation(
                            f"api_key:{principal.name}",
                            f"concurrent calls per API key: at most {keys.limit}; this key has"
                            f" {keys.held(principal.key_id)} running",
                            quota_id="max-concurrent-rpcs-per-key",
                            quota_value=keys.limit,
                        ),
                        ErrorInfo("CONCURRENT_RPC_LIMIT_PER_KEY", {"api_key": principal.name}),
                    ),
                )
            keys.take(principal.key_id)
            call.key = principal.key_id
        tenants = self._tenant_slots
        if principal is not None and tenants.limit > 0:
            if tenants.full(principal.tenant):
                await abort(
                    context,
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"the keys of tenant {principal.tenant!r} already have"
                    f" {tenants.held(principal.tenant)} calls running together, the limit for"
                    " one tenant (streams count until they end); retry with backoff once some"
                    " finish, or raise the limit with --max-concurrent-rpcs-per-tenant /"
                    f" NEXUS_MAX_CONCURRENT_RPCS_PER_TENANT (now {tenants.limit})",
                    (
                        QuotaViolation(
                            f"tenant:{principal.tenant}",
                            f"concurrent calls per tenant: at most {tenants.limit}; this tenant"
                            f" has {tenants.held(principal.tenant)} running",
                            quota_id="max-concurrent-rpcs-per-tenant",
                            quota_value=tenants.limit,
                        ),
                        ErrorInfo(
                            "CONCURRENT_RPC_LIMIT_PER_TENANT", {"tenant": principal.tenant}
                        ),
                    ),
                )
            tenants.take(principal.tenant)
            call.tenant = principal.tenant
        if self._slots is None:
            return
        if self._slots.locked():
            await abort(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "the server is at its concurrent RPC limit (--max-concurrent-rpcs /"
                " NEXUS_MAX_CONCURRENT_RPCS); retry with backoff",
                (
                    QuotaViolation(
                        "server",
                        f"concurrent calls on this server: at most {self._limit}",
                        quota_id="max-concurrent-rpcs",
                        quota_value=self._limit,
                    ),
                    ErrorInfo("CONCURRENT_RPC_LIMIT"),
                ),
            )
        await self._slots.acquire()
        call.held = True
