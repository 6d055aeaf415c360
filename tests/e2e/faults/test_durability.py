"""A clean SIGTERM keeps every write; kill -9 is tests/e2e/faults/test_fault_kill.py, and
SIGTERM under load is tests/e2e/faults/test_fault_shutdown.py."""

from __future__ import annotations

import asyncio
import signal

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.server import SERVICE_NAMES
from tests.process import ServerProcess


async def test_sigterm_turns_health_not_serving_and_exits_cleanly(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = memory_grpc.MemoryServiceStub(channel)
        s = await stub.CreateSession(memory_pb2.CreateSessionRequest(session=memory_pb2.Session()))
        ep = await stub.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=s.id, user_message="x")
        )
        # A health watcher (a load balancer) hears NOT_SERVING as shutdown
        # begins, for the whole server and each service, then the stream ends.
        health = health_pb2_grpc.HealthStub(channel)
        watches = [
            health.Watch(health_pb2.HealthCheckRequest(service=name))
            for name in ("", *SERVICE_NAMES)
        ]
        for watch in watches:
            first = await asyncio.wait_for(watch.read(), 10)
            assert first.status == health_pb2.HealthCheckResponse.SERVING
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        for watch in watches:
            heard = await asyncio.wait_for(watch.read(), 10)
            assert heard.status == health_pb2.HealthCheckResponse.NOT_SERVING
            assert await asyncio.wait_for(watch.read(), 10) is grpc.aio.EOF
            assert await watch.code() == grpc.StatusCode.OK
    assert server.terminate() == 0
    server = ServerProcess(tmp_path / "data").start()
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            got = await memory_grpc.MemoryServiceStub(channel).GetEpisode(
                memory_pb2.GetEpisodeRequest(id=ep.id)
            )
            assert got.user_message == "x"
    finally:
        server.terminate()
