"""A clean SIGTERM keeps every write; kill -9 is tests/faults/test_fault_kill.py, and
SIGTERM under load is tests/faults/test_fault_shutdown.py."""

from __future__ import annotations

import grpc

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as m
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as mgrpc
from tests.process import ServerProcess


async def test_sigterm_turns_health_not_serving_and_exits_cleanly(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = mgrpc.MemoryServiceStub(channel)
        s = await stub.CreateSession(m.CreateSessionRequest(session=m.Session()))
        ep = await stub.CreateEpisode(m.CreateEpisodeRequest(session_id=s.id, user_message="x"))
    assert server.terminate() == 0
    server = ServerProcess(tmp_path / "data").start()
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            got = await mgrpc.MemoryServiceStub(channel).GetEpisode(m.GetEpisodeRequest(id=ep.id))
            assert got.user_message == "x"
    finally:
        server.terminate()
