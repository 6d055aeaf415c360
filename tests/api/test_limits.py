"""The concurrent-RPC cap: calls past it are refused, counted and logged."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.app import App
from nexus_grpc.config import Settings
from nexus_grpc.core.requests import RequestObserver
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.server import start_server
from tests.support import HashingEmbedder

# On SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True


class Recorder(RequestObserver):
    def __init__(self) -> None:
        self.codes: list[tuple[str, grpc.StatusCode]] = []
        self.stream_open = asyncio.Event()
        self.refused = asyncio.Event()

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        self.codes.append((method, code))
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            self.refused.set()

    def stream_started(self, method: str) -> None:
        self.stream_open.set()


async def test_calls_past_the_cap_are_resource_exhausted_and_counted(tmp_path, store_settings):
    settings = Settings(
        listen="127.0.0.1:0", data_dir=tmp_path / "d", max_concurrent_rpcs=1, **store_settings
    )
    recorder = Recorder()
    running = await start_server(settings, App(settings, embedder=HashingEmbedder()),
                                 observer=recorder)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        watch = graph_grpc.GraphServiceStub(channel).WatchExtractions(
            graph_pb2.WatchExtractionsRequest()
        )
        reader = asyncio.ensure_future(watch.read())
        await recorder.stream_open.wait()  # the open stream holds the only slot
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await memory_grpc.MemoryServiceStub(channel).ListProjects(
                memory_pb2.ListProjectsRequest()
            )
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "limit" in refused.value.details()
        # The server records the call once its status is sent, which may be just
        # after the client has it.
        await asyncio.wait_for(recorder.refused.wait(), 10)
        assert ("/nexus.memory.v1.MemoryService/ListProjects",
                grpc.StatusCode.RESOURCE_EXHAUSTED) in recorder.codes
        # Health stays answerable when the server is saturated.
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        reader.cancel()
    finally:
        await channel.close()
        await running.stop(None)
