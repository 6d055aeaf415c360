"""The grpc.aio server: servicers, health, reflection, interceptors, shutdown.

Shutdown order (after vLLM's gRPC server): health turns NOT_SERVING first so
load balancers stop sending, then ``server.stop(grace)`` lets in-flight RPCs
finish, then workers and stores close.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from nexus_grpc.api.graph_servicer import GraphServicer
from nexus_grpc.api.interceptors import RequestObserver, ServiceInterceptor
from nexus_grpc.api.memory_servicer import MemoryServicer
from nexus_grpc.api.reflection import enable_reflection
from nexus_grpc.api.summary_servicer import SummaryServicer
from nexus_grpc.app import App
from nexus_grpc.auth import AuthInterceptor, KeyRing
from nexus_grpc.config import Settings
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as gpb
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as ggrpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as mpb
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as mgrpc
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as spb
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2_grpc as sgrpc
from nexus_grpc.metrics import Metrics, MetricsServer, combine, start_metrics_server
from nexus_grpc.tls import server_credentials

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    mpb.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    spb.DESCRIPTOR.services_by_name["SummaryService"].full_name,
    gpb.DESCRIPTOR.services_by_name["GraphService"].full_name,
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


@dataclass
class RunningServer:
    server: grpc.aio.Server
    app: App
    health: health.aio.HealthServicer
    port: int
    metrics: MetricsServer | None = None

    async def stop(self, grace: float | None) -> None:
        await self.health.enter_graceful_shutdown()
        # Watch streams end cleanly (OK) instead of running out the grace period.
        self.app.graph_events.close()
        await self.server.stop(grace)
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.stop)
        await self.app.close()


async def start_server(
    settings: Settings,
    app: App | None = None,
    *,
    observer: RequestObserver | None = None,
    reconcile: bool = True,
) -> RunningServer:
    # Key file and certificates are read first: a mistake in them fails before any work.
    keys = KeyRing.from_file(settings.auth_keys_file) if settings.auth_keys_file else None
    credentials = server_credentials(settings)
    app = app or App(settings)
    await app.start(reconcile=reconcile)
    metrics = Metrics(app) if settings.metrics_listen else None
    observer = combine(observer, metrics)
    # Auth first, so a call without a valid key does no work.
    interceptors: list[grpc.aio.ServerInterceptor] = []
    if keys is not None:
        interceptors.append(AuthInterceptor(keys, observer))
    interceptors.append(ServiceInterceptor(settings.max_concurrent_rpcs, observer))
    server = grpc.aio.server(interceptors=interceptors, options=server_options(settings))
    mgrpc.add_MemoryServiceServicer_to_server(MemoryServicer(app), server)
    sgrpc.add_SummaryServiceServicer_to_server(SummaryServicer(app), server)
    ggrpc.add_GraphServiceServicer_to_server(GraphServicer(app), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    enable_reflection((*SERVICE_NAMES, health.SERVICE_NAME), server)
    if credentials is not None:
        port = server.add_secure_port(settings.listen, credentials)
    else:
        port = server.add_insecure_port(settings.listen)
    if port == 0:
        await app.close()
        raise RuntimeError(f"cannot listen on {settings.listen}")
    try:
        metrics_server = start_metrics_server(settings.metrics_listen, metrics) if metrics else None
    except (OSError, ValueError):
        await server.stop(None)
        await app.close()
        raise
    await server.start()
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    # tests/process.py and operators' scripts parse this line: keep its shape.
    log.info("serving on %s (port %d)", settings.listen, port)
    log.info(
        "transport %s, API keys %s",
        "mTLS" if settings.tls_client_ca else "TLS" if credentials else "plaintext",
        "on" if keys else "off",
    )
    return RunningServer(server, app, health_servicer, port, metrics_server)


async def serve(settings: Settings) -> None:
    running = await start_server(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        log.info(
            "shutting down: NOT_SERVING, then up to %.0fs for in-flight RPCs",
            settings.grace_seconds,
        )
    finally:
        await running.stop(settings.grace_seconds)
        log.info("stopped")
