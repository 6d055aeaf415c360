"""Test helpers: a fast deterministic embedder and a running-server harness.

The embedder stands in for MiniLM where a test is about plumbing, not
meaning (one test uses the real model); it hashes words into a vector, so
texts sharing words are close, deterministically, in microseconds.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import math
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from nexus_grpc.app import App
from nexus_grpc.client.connection import open_channel
from nexus_grpc.domain import vector_collections
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2_grpc as summary_grpc
from nexus_grpc.runtime.config import Settings
from nexus_grpc.server import RunningServer, start_server
from nexus_grpc.vectors import VectorIndex
from nexus_grpc.vectors.edge import EdgeVectorIndex


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
    # No page-cache warm-up unless a test asks for one (it has its own tests,
    # tests/integration/vectors/test_vector_prewarm.py): a harness's shards hold a
    # few points, and on make test's tmpfs the warmer would read the 106 MB of
    # pages qdrant's maps allocate there, at every start.
    settings_kw.setdefault("vector_prewarm_mb", 0)
    settings = Settings(listen="127.0.0.1:0", data_dir=data_dir, **settings_kw)
    embedder = embedder or HashingEmbedder()
    if index is None and not settings.qdrant_url and not settings.database_url:
        await _empty_collections(settings.vectors_dir, embedder.dimension)
    app = App(settings, embedder=embedder, index=index)
    return harness_for(await start_server(settings, app))


#: Per test process: a folder of the server's empty qdrant-edge collections,
#: by vector dimension.
_EMPTY_COLLECTIONS: dict[int, Path] = {}


async def _empty_collections(vectors_dir: Path, dimension: int) -> None:
    """Give a new data directory the empty collections a first start creates.

    Creating a qdrant-edge shard and its payload indexes takes a first start
    0.2 s a collection on these cores (0.8 s of a harness's 1 s), against
    0.05 s to open one; a suite starts about a thousand servers. So each test
    process creates them once, as ``Indexer.ensure`` does, and a harness
    starts on a copy: its server opens real shards (checking their dimension
    and indexes as at any restart). A first start's creation is still run by
    every server started another way (a subprocess, the PostgreSQL store, a
    data directory the test prepared) and by tests/integration/vectors."""
    template = _EMPTY_COLLECTIONS.get(dimension)
    if template is None:
        folder = tempfile.mkdtemp(prefix="nexus-empty-collections-")
        atexit.register(shutil.rmtree, folder, True)
        template = Path(folder) / "vectors"
        index = EdgeVectorIndex(template)
        for spec in vector_collections.ALL:
            await index.ensure_collection(spec.name, dimension, spec.indexed_fields)
        await index.close()
        _EMPTY_COLLECTIONS[dimension] = template
    await asyncio.to_thread(_copy_collections, template, vectors_dir)


def _copy_collections(template: Path, vectors_dir: Path) -> None:
    if vectors_dir.exists() or not vectors_dir.parent.parent.is_dir():
        return  # the test prepared this directory (or its parent) itself
    # The shards' write-ahead logs and pages are sparse files of 32 MiB (884 KiB
    # on disk for the four): a plain copy would write all 495 MiB of them.
    try:
        vectors_dir.parent.mkdir(exist_ok=True)
        subprocess.run(
            ["cp", "-r", "--sparse=always", str(template), str(vectors_dir)],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError):
        shutil.rmtree(vectors_dir, ignore_errors=True)  # the server meets it itself


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
