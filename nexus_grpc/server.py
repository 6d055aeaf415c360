"""The grpc.aio server: servicers, health, reflection, interceptors, shutdown.

Shutdown order (after vLLM's gRPC server), all within ``grace`` seconds:

1. Health turns NOT_SERVING, so load balancers stop sending; health Watch
   streams send it and end (OK), as WatchExtractions streams do.
2. The gate closes: a new call is refused with UNAVAILABLE ("shutting down"),
   a status every client may retry elsewhere, while calls already running
   finish with their real answer.  Until the gate is idle the server keeps
   taking calls off the wire, because grpc core CANCELs (not UNAVAILABLE) any
   call that arrived but was not yet dispatched when ``server.stop`` begins:
   a client could not tell whether such a write happened.
3. ``server.stop(remaining grace)``: the listener and connections close; any
   RPC still running when the grace runs out is cancelled.
4. Workers and stores close.

tests/e2e/faults/test_fault_shutdown.py checks this from a client, against the real
process, under load.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_health.v1.health_pb2 import HealthCheckResponse

from nexus_grpc.api.graph_servicer import GraphServicer
from nexus_grpc.api.interceptors import ServiceInterceptor
from nexus_grpc.api.memory_servicer import MemoryServicer
from nexus_grpc.api.reflection import enable_reflection
from nexus_grpc.api.summary_servicer import SummaryServicer
from nexus_grpc.app import App, StartupError
from nexus_grpc.core import redact
from nexus_grpc.errors import ResourceInfo
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2_grpc as summary_grpc
from nexus_grpc.observability.metrics import Metrics, MetricsServer, combine, start_metrics_server
from nexus_grpc.rpc.auth import AuthInterceptor, KeyRing
from nexus_grpc.rpc.error_status import abort
from nexus_grpc.rpc.interception import HandlerInterceptor
from nexus_grpc.rpc.requests import RequestObserver
from nexus_grpc.runtime import tracing
from nexus_grpc.runtime.config import Settings
from nexus_grpc.runtime.tls import server_credentials

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    summary_pb2.DESCRIPTOR.services_by_name["SummaryService"].full_name,
    graph_pb2.DESCRIPTOR.services_by_name["GraphService"].full_name,
)


def server_options(settings: Settings) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        # Keepalive: detect dead LAN peers, and accept clients' pings every 10 s.
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.max_connection_idle_ms", 15 * 60_000),
    ]


class HealthServicer(health_pb2_grpc.HealthServicer):
    """grpc.health.v1, as ``grpc_health.v1.health.aio.HealthServicer`` does it,
    except for Watch:

    - Watch is an async generator, like every server stream here, so it passes
      through ``ServiceInterceptor`` (which iterates a handler's result; the
      library's Watch writes with ``context.write`` and returns None there).
    - Once shutdown begins, Watch sends NOT_SERVING and ends with OK.  An open
      Watch would otherwise hold ``server.stop(grace)`` for the whole grace
      period, and be cancelled at its end.
    """

    def __init__(self) -> None:
        self._status: dict[str, HealthCheckResponse.ServingStatus.ValueType] = {
            "": HealthCheckResponse.SERVING
        }
        self._changed = asyncio.Condition()
        self._shutting_down = False

    async def Check(self, request, context):  # noqa: N802 - the gRPC method name
        status = self._status.get(request.service)
        if status is None:
            await abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"unknown service {request.service!r}",
                (ResourceInfo("service", request.service),),
            )
        return HealthCheckResponse(status=status)

    async def Watch(self, request, context) -> AsyncIterator[HealthCheckResponse]:  # noqa: N802
        last = None

        def moved() -> bool:
            status = self._status.get(request.service, HealthCheckResponse.SERVICE_UNKNOWN)
            return status != last or self._shutting_down

        while True:
            async with self._changed:
                await self._changed.wait_for(moved)
                status = self._status.get(request.service, HealthCheckResponse.SERVICE_UNKNOWN)
                closing = self._shutting_down
            if status != last:
                yield HealthCheckResponse(status=status)
                last = status
            if closing:
                return

    async def set(self, service: str, status: HealthCheckResponse.ServingStatus.ValueType) -> None:
        """Set a service's status; ignored once shutdown has begun."""
        if self._shutting_down:
            return
        async with self._changed:
            self._status[service] = status
            self._changed.notify_all()

    async def enter_graceful_shutdown(self) -> None:
        """Every service NOT_SERVING, for good; Watch streams say so and end."""
        async with self._changed:
            self._shutting_down = True
            for service in self._status:
                self._status[service] = HealthCheckResponse.NOT_SERVING
            self._changed.notify_all()


#: How often health asks the system of record whether it answers.
STORE_PROBE_SECONDS = 1.0


class StoreHealth:
    """Keeps grpc.health.v1 following the system of record.

    Health was set SERVING once at start: with PostgreSQL down every call
    answered UNAVAILABLE, yet Check said SERVING, so load balancers, Docker
    and the clients' round robin (which health-check, see connection.py) kept
    sending there. The store is the one dependency without which no RPC can
    answer (an index, embedder or LLM that is away degrades some answers and
    queues work; GetServiceStatus details those): while a probe of it fails,
    the whole server ("") and each service are NOT_SERVING, and SERVING again
    from the first probe that succeeds. Shutdown's NOT_SERVING is final
    (HealthServicer.set ignores changes after it).
    """

    def __init__(
        self,
        app: App,
        health: HealthServicer,
        interval: float = STORE_PROBE_SECONDS,
    ) -> None:
        self.app = app
        self.health = health
        self.interval = interval
        self.serving = True
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="store health")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            # A periodic probe: there is no event for "the database came back".
            await asyncio.sleep(self.interval)
            try:
                state = await self.app.check_store()
            except Exception:  # the probe reports failures; anything else is a bug
                log.exception("the store health probe failed")
                continue
            if state.ok == self.serving:
                continue
            self.serving = state.ok
            if state.ok:
                log.info("%s answers again: health SERVING", state.name)
            else:
                log.warning("%s does not answer (%s): health NOT_SERVING", state.name, state.detail)
            status = HealthCheckResponse.SERVING if state.ok else HealthCheckResponse.NOT_SERVING
            for name in ("", *SERVICE_NAMES):
                await self.health.set(name, status)


# How long no new call may arrive before shutdown stops the listener (step 2).
DRAIN_QUIET_SECONDS = 0.2
# Even a stop without grace lets the streams it has just ended (Watch,
# WatchExtractions) send their OK first, for up to this long.
STREAM_END_SECONDS = 1.0
# Health keeps answering (NOT_SERVING) while the gate refuses, and reflection
# holds no data: neither is refused, and neither keeps the drain's quiet
# window open, but running health calls are waited for like any other.
UNGATED_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")


class ShutdownGate(HandlerInterceptor[bool]):
    """Counts the calls in flight, and once closed refuses new ones with
    UNAVAILABLE, so shutdown can wait for the running ones (see the module doc).

    Outermost interceptor (see ``interceptor_chain``): a refused call does no
    work, auth included.
    """

    def __init__(self) -> None:
        self.closed = False
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._arrived = asyncio.Event()

    def close(self) -> None:
        self.closed = True

    @property
    def active(self) -> int:
        return self._active

    async def drain(self, timeout: float, quiet: float) -> bool:  # noqa: ASYNC109 - grace budget
        """Wait until no call is running and no gated call has arrived for
        ``quiet`` seconds: a call grpc received but had not dispatched yet gets
        its clean UNAVAILABLE here instead of core's CANCELLED at
        ``server.stop``.  False when ``timeout`` ran out with calls running."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                async with asyncio.timeout(max(0.0, remaining)):
                    await self._idle.wait()
            except TimeoutError:
                return False
            self._arrived.clear()
            remaining = deadline - time.monotonic()
            try:
                async with asyncio.timeout(max(0.0, min(quiet, remaining))):
                    await self._arrived.wait()
            except TimeoutError:
                return self._active == 0
            # A call arrived in the quiet window (refused, or running if it was
            # dispatched just before the gate closed): wait again.

    def _enter(self, gated: bool, context: grpc.aio.ServicerContext) -> None:
        if gated:
            self._arrived.set()
        self._active += 1
        self._idle.clear()
        # Done when grpc has sent the status, not when the handler returns: a
        # stream that shutdown ended must get its OK out before server.stop.
        context.add_done_callback(self._leave)

    def _leave(self, _context: object = None) -> None:
        self._active -= 1
        if self._active == 0:
            self._idle.set()

    async def _refuse(self, context: grpc.aio.ServicerContext) -> None:
        self._arrived.set()
        await context.abort(
            grpc.StatusCode.UNAVAILABLE,
            "the server is shutting down; retry (the call was not started)",
        )

    def intercept(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        if handler.stream_stream:
            return handler  # bidi-streaming (reflection): not counted
        # A client stream (ImportEpisodes) is a call like a unary one: counted
        # from its start until its one answer is sent.
        return self.wrap(handler, not details.method.startswith(UNGATED_PREFIXES))

    async def prologue(self, gated: bool, context: grpc.aio.ServicerContext, request: Any) -> None:
        if gated and self.closed:
            await self._refuse(context)
        self._enter(gated, context)


@dataclass
class RunningServer:
    server: grpc.aio.Server
    app: App
    health: HealthServicer
    port: int
    metrics: MetricsServer | None = None
    gate: ShutdownGate = field(default_factory=ShutdownGate)
    tracing: bool = False  # this server turned tracing on, so it flushes it at stop
    store_health: StoreHealth | None = None

    async def stop(self, grace: float | None) -> None:
        """Graceful stop in the order of the module doc.  ``grace=None`` waits
        only for the streams shutdown ends (up to STREAM_END_SECONDS), then
        cancels whatever is still running."""
        started = time.monotonic()
        if self.store_health is not None:
            await self.store_health.stop()
        await self.health.enter_graceful_shutdown()
        self.gate.close()
        # Watch streams end cleanly (OK) instead of running out the grace period.
        self.app.graph_events.close()
        if grace is None:
            await self.gate.drain(STREAM_END_SECONDS, 0.0)
        else:
            if not await self.gate.drain(grace, DRAIN_QUIET_SECONDS):
                log.warning(
                    "%d RPCs still running after the %.0fs grace period; cancelling them",
                    self.gate.active,
                    grace,
                )
            grace = max(0.0, grace - (time.monotonic() - started))
        await self.server.stop(grace)
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.stop)
        await self.app.close()
        if self.tracing:
            await asyncio.to_thread(tracing.shutdown)


def interceptor_chain(
    gate: ShutdownGate,
    keys: KeyRing | None,
    observer: RequestObserver | None,
    settings: Settings,
) -> list[grpc.aio.ServerInterceptor]:
    """The one place that orders the interceptors; grpc runs them first to last.

    1. ``ShutdownGate``: once shutdown began, a new call is refused with
       UNAVAILABLE (retryable) before anything else looks at it, auth
       included, and every call that gets past it is counted for the drain.
    2. ``AuthInterceptor`` (when a key file is given): a call without a valid
       key, or acting for a user its key does not hold, is refused before any
       work; it binds the caller's tenant for everything after it. It records
       the calls it refuses with the observer itself, since they never reach
       the next one.
    3. ``ServiceInterceptor``: request id, deadline, tracing span, concurrency
       cap, error mapping, response size, the access log and the observer.
    """
    chain: list[grpc.aio.ServerInterceptor] = [gate]
    if keys is not None:
        chain.append(AuthInterceptor(keys, observer))
    chain.append(
        ServiceInterceptor(
            settings.max_concurrent_rpcs,
            observer,
            settings.max_message_bytes,
            # Without keys there is no caller to count by.
            settings.max_concurrent_rpcs_per_key if keys is not None else 0,
            settings.rpcs_per_tenant if keys is not None else 0,
        )
    )
    return chain


def check_limits(settings: Settings, keys: KeyRing | None) -> None:
    """A per-key limit at or above the server's would let one key take every
    slot, which is what it is for preventing: refuse to start with it."""
    per_key, overall = settings.max_concurrent_rpcs_per_key, settings.max_concurrent_rpcs
    if keys is not None and 0 < overall <= per_key:
        raise StartupError(
            f"--max-concurrent-rpcs-per-key ({per_key}) must be below --max-concurrent-rpcs"
            f" ({overall}), or one API key could take every slot; lower it (0 turns the"
            " per-key limit off)"
        )
    per_tenant = settings.max_concurrent_rpcs_per_tenant
    if keys is not None and 0 < overall <= per_tenant:
        raise StartupError(
            f"--max-concurrent-rpcs-per-tenant ({per_tenant}) must be below"
            f" --max-concurrent-rpcs ({overall}), or one tenant could take every slot; lower"
            " it (-1: half the server's, the default; 0 turns the per-tenant limit off)"
        )
    for name in ("max_concurrent_rpcs_per_tenant", "max_watch_streams_per_tenant"):
        if getattr(settings, name) < -1:
            flag = "--" + name.replace("_", "-")
            raise StartupError(f"{flag} must be -1 (half the server's), 0 (off) or a limit")


async def start_server(
    settings: Settings,
    app: App | None = None,
    *,
    observer: RequestObserver | None = None,
    reconcile: bool = True,
) -> RunningServer:
    # Key file and certificates are read first: a mistake in them fails before any work.
    # From here on, no answer and no log line shows a credential of these settings.
    redact.remember(settings.credentials())
    keys = KeyRing.from_file(settings.auth_keys_file) if settings.auth_keys_file else None
    check_limits(settings, keys)
    credentials = server_credentials(settings)
    tracing_on = bool(settings.otel_endpoint) and not tracing.enabled()
    if tracing_on:  # before App: it wraps its components only when tracing is on
        tracing.configure(settings.otel_endpoint)
    app = app or App(settings)
    if keys is not None:
        app.budgets.set_tenants(keys.tenant_budgets, keys.user_budgets)
    await app.start(reconcile=reconcile)  # closes what it opened if it fails
    metrics = Metrics(app) if settings.metrics_listen else None
    observer = combine(observer, metrics)
    gate = ShutdownGate()
    server = grpc.aio.server(
        interceptors=interceptor_chain(gate, keys, observer, settings),
        options=server_options(settings),
    )
    memory_grpc.add_MemoryServiceServicer_to_server(MemoryServicer(app), server)
    summary_grpc.add_SummaryServiceServicer_to_server(SummaryServicer(app), server)
    graph_grpc.add_GraphServiceServicer_to_server(GraphServicer(app), server)
    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    enable_reflection((*SERVICE_NAMES, health.SERVICE_NAME), server)
    try:
        if credentials is not None:
            port = server.add_secure_port(settings.listen, credentials)
        else:
            port = server.add_insecure_port(settings.listen)
    except RuntimeError:  # newer grpcio raises where older ones returned 0
        port = 0
    if port == 0:
        await server.stop(None)
        await app.close()
        raise StartupError(
            f"cannot listen on {settings.listen}: the address is in use or not one of this host's"
        )
    try:
        metrics_server = start_metrics_server(settings.metrics_listen, metrics) if metrics else None
    except (OSError, ValueError) as exc:
        await server.stop(None)
        await app.close()
        raise StartupError(f"cannot serve metrics on {settings.metrics_listen}: {exc}") from exc
    await server.start()
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    store_health = StoreHealth(app, health_servicer)
    store_health.start()
    # tests/process.py and operators' scripts parse this line: keep its shape.
    log.info("serving on %s (port %d)", settings.listen, port)
    log.info(
        "transport %s, API keys %s",
        "mTLS" if settings.tls_client_ca else "TLS" if credentials else "plaintext",
        "on" if keys else "off",
    )
    return RunningServer(
        server, app, health_servicer, port, metrics_server, gate, tracing_on, store_health
    )


async def serve(settings: Settings) -> None:
    running = await start_server(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        stopped = asyncio.create_task(stop.wait())
        failed = asyncio.create_task(running.app.failed.wait())
        await asyncio.wait((stopped, failed), return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        failed.cancel()
        if running.app.failure is not None:
            log.error("cannot go on serving: %s", running.app.failure)
        else:
            log.info(
                "shutting down: NOT_SERVING, new calls refused, up to %.0fs for in-flight RPCs",
                settings.grace_seconds,
            )
    finally:
        await running.stop(settings.grace_seconds)
        log.info("stopped")
    if running.app.failure is not None:
        raise running.app.failure
