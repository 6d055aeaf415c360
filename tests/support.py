"""Test helpers: a fast deterministic embedder and a running-server harness.

The embedder stands in for MiniLM where a test is about plumbing, not
meaning (one test uses the real model); it hashes words into a vector, so
texts sharing words are close, deterministically, in microseconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from nexus_grpc.app import App
from nexus_grpc.client.connection import open_channel
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2_grpc as summary_grpc
from nexus_grpc.runtime.config import Settings
from nexus_grpc.server import RunningServer, start_server
from nexus_grpc.vectors import VectorIndex


class HashingEmbedder:
    model_id = "test-hashing-64"
    dimension = 64

    def __init__(self) -> None:
        self.calls = 0
        self.fail_with: Exception | None = None

    similarity_temperature = 0.05
    #: Hashed words have no meaning to set a floor by: none.
    similarity_floor = -1.0

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self.embed([text])
        return vector

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> list[float]:
        vec = [0.0] * self.dimension
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
            vec[h % self.dimension] += 1.0 if h & 0x100 else -1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [x / norm for x in vec]

    async def close(self) -> None:
        pass


@dataclass
class Harness:
    running: RunningServer
    channel: grpc.aio.Channel
    memory: memory_grpc.MemoryServiceStub
    graph: graph_grpc.GraphServiceStub
    summary: summary_grpc.SummaryServiceStub
    app: App
    target: str
    extras: dict = field(default_factory=dict)

    async def close(self) -> None:
        await self.channel.close()
        await self.running.stop(None)


async def start_harness(
    data_dir: Path, *, embedder=None, index: VectorIndex | None = None, **settings_kw
) -> Harness:
    settings = Settings(listen="127.0.0.1:0", data_dir=data_dir, **settings_kw)
    app = App(settings, embedder=embedder or HashingEmbedder(), index=index)
    return harness_for(await start_server(settings, app))


def harness_for(running: RunningServer) -> Harness:
    """A harness around a server the test started itself."""
    target = f"127.0.0.1:{running.port}"
    # The shared connection module, without retries: these tests assert the status
    # of each single call.
    channel = open_channel(target, retry=None)
    return Harness(
        running,
        channel,
        memory_grpc.MemoryServiceStub(channel),
        graph_grpc.GraphServiceStub(channel),
        summary_grpc.SummaryServiceStub(channel),
        running.app,
        target,
    )


async def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02):  # noqa: ASYNC109
    """Poll an async predicate: for state that has no event to wait on (e.g. job rows)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await predicate()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


async def take(call, n: int, limit: float = 30.0) -> list:
    """The next ``n`` messages of a server stream (fails rather than hangs)."""

    async def read() -> list:
        out = []
        while len(out) < n:
            msg = await call.read()
            assert msg is not grpc.aio.EOF, f"stream ended after {len(out)}/{n} messages"
            out.append(msg)
        return out

    return await asyncio.wait_for(read(), limit)


#: Every RPC of the three services, as (service, method) descriptors.
SERVICES = [
    memory_pb2.DESCRIPTOR.services_by_name["MemoryService"],
    graph_pb2.DESCRIPTOR.services_by_name["GraphService"],
    summary_pb2.DESCRIPTOR.services_by_name["SummaryService"],
]
METHODS = [(service, method) for service in SERVICES for method in service.methods]


def bearer(key: str) -> tuple[tuple[str, str], ...]:
    """Call metadata presenting an API key."""
    return (("authorization", f"Bearer {key}"),)


async def index_idle(h: Harness, tables: tuple[str, ...] = ("memories",)) -> bool:
    """No index job of these tables (memories unless told) is waiting or running."""
    kinds = ", ".join(f"'index:{t}'" for t in tables)
    n = await h.app.db.read_sql(
        lambda c: c.execute(
            "SELECT COUNT(*) FROM jobs"
            f" WHERE kind IN ({kinds}) AND state IN ('pending', 'running')"
        ).fetchone()[0]
    )
    return n == 0


async def erasure_done(h: Harness, erasure_id: int, metadata=None, limit: float = 60.0):
    """The erasure's receipt, once WatchErasure says it is DONE."""
    from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

    last = None
    async for last in h.memory.WatchErasure(
        memory_pb2.WatchErasureRequest(id=erasure_id), metadata=metadata, timeout=limit
    ):
        if last.state == memory_pb2.ERASURE_STATE_DONE:
            return last
    raise AssertionError(f"the watch ended before the erasure was done: {last}")
