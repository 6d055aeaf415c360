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
from grpc_reflection.v1alpha import reflection

from nexus_grpc.api.interceptors import RequestObserver, ServiceInterceptor
from nexus_grpc.api.memory_servicer import MemoryServicer
from nexus_grpc.app import App
from nexus_grpc.config import Settings
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as mpb
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as mgrpc

log = logging.getLogger(__name__)

SERVICE_NAMES = (mpb.DESCRIPTOR.services_by_name["MemoryService"].full_name,)


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

    async def stop(self, grace: float | None) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        await self.app.close()


async def start_server(
    settings: Settings,
    app: App | None = None,
    *,
    observer: RequestObserver | None = None,
    reconcile: bool = True,
) -> RunningServer:
    app = app or App(settings)
    await app.start(reconcile=reconcile)
    server = grpc.aio.server(
        interceptors=[ServiceInterceptor(settings.max_concurrent_rpcs, observer)],
        options=server_options(settings),
    )
    mgrpc.add_MemoryServiceServicer_to_server(MemoryServicer(app), server)
    # --- GraphService / SummaryService servicers are registered here ---
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    port = server.add_insecure_port(settings.listen)
    if port == 0:
        await app.close()
        raise RuntimeError(f"cannot listen on {settings.listen}")
    await server.start()
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("serving on %s (port %d)", settings.listen, port)
    return RunningServer(server, app, health_servicer, port)


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
