"""The service interceptor wraps every kind of server-streaming handler."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from nexus_grpc.api.interceptors import ServiceInterceptor


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
