"""One behavioural suite over both VectorIndex backends (edge on disk, qdrant-client local)."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nexus_grpc.vectors import (
    CollectionNotFound,
    DimensionMismatch,
    EdgeVectorIndex,
    Filter,
    MatchAny,
    QdrantVectorIndex,
    VectorIndex,
    VectorIndexLocked,
    VectorIndexUnavailable,
    VectorPoint,
)

DIM = 8
FIELDS = {"user": "integer", "kind": "keyword", "pinned": "bool"}


def vec(i: int) -> list[float]:
    """Distinct directions: point i is closest to vec(i) and drifts away with |i - j|."""
    v = [math.cos(i * 0.3 + k) for k in range(DIM)]
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def point(i: int) -> VectorPoint:
    return VectorPoint(
        id=i,
        vector=vec(i),
        payload={
            "user": i % 3,
            "kind": "event" if i % 3 == 0 else ("fact" if i % 2 else "note"),
            "pinned": i % 4 == 0,
            "text": f"t{i}",
        },
    )


@pytest.fixture(params=["edge", "remote"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    idx: VectorIndex
    if request.param == "edge":
        idx = EdgeVectorIndex(tmp_path / "vectors")
    else:
        idx = QdrantVectorIndex(location=":memory:")
    assert isinstance(idx, VectorIndex)
    yield idx
    await idx.close()


async def filled(index: VectorIndex, n: int = 30) -> None:
    await index.ensure_collection("mem", DIM, FIELDS)
    await index.upsert("mem", [point(i) for i in range(n)])


async def test_upsert_search_order(index: VectorIndex) -> None:
    await filled(index)
    hits = await index.search("mem", vec(7), filter=None, limit=5)
    assert [h.id for h in hits][0] == 7
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
    assert hits[0].payload["text"] == "t7" and hits[0].payload["pinned"] is False
    assert await index.search("mem", vec(7), filter=None, limit=0) == []


async def test_idempotent_upsert_and_ensure(index: VectorIndex) -> None:
    await filled(index)
    await index.ensure_collection("mem", DIM, FIELDS)  # idempotent
    await index.upsert("mem", [point(i) for i in range(10)])
    assert await index.count("mem") == 30
    # re-upsert replaces vector and payload
    await index.upsert("mem", [VectorPoint(3, vec(20), {"user": 9, "kind": "x", "pinned": True})])
    (hit,) = await index.search(
        "mem", vec(20), filter=Filter(must=(MatchAny("user", (9,)),)), limit=3
    )
    assert hit.id == 3 and hit.payload == {"user": 9, "kind": "x", "pinned": True}
    assert await index.count("mem") == 30


async def test_delete(index: VectorIndex) -> None:
    await filled(index)
    await index.delete("mem", [1, 2, 999])  # missing ids are fine
    await index.delete("mem", [])
    assert await index.count("mem") == 28
    hits = await index.search("mem", vec(1), filter=None, limit=30)
    assert {1, 2}.isdisjoint(h.id for h in hits)


async def test_nested_filter(index: VectorIndex) -> None:
    n = 40
    await filled(index, n)
    pts = {i: point(i).payload for i in range(n)}
    f = Filter(
        must=(
            MatchAny("user", (0, 1)),
            Filter(should=(MatchAny("kind", ("fact", "event")), MatchAny("pinned", (True,)))),
        ),
        must_not=(MatchAny("pinned", (False,)), MatchAny("user", (1,))),
    )

    def expected(p: dict) -> bool:
        return (
            p["user"] in (0, 1)
            and (p["kind"] in ("fact", "event") or p["pinned"] is True)
            and p["pinned"] is not False
            and p["user"] != 1
        )

    want = {i for i, p in pts.items() if expected(p)}
    assert want and len(want) < n
    hits = await index.search("mem", vec(0), filter=f, limit=n)
    assert {h.id for h in hits} == want

    # should alone, mixed-type MatchAny, both bools, empty MatchAny, empty Filter
    f2 = Filter(should=(MatchAny("kind", ("event",)), MatchAny("user", (2,))))
    hits = await index.search("mem", vec(0), filter=f2, limit=n)
    assert {h.id for h in hits} == {
        i for i, p in pts.items() if p["kind"] == "event" or p["user"] == 2
    }
    both = Filter(must=(MatchAny("pinned", (True, False)),))
    assert len(await index.search("mem", vec(0), filter=both, limit=n)) == n
    mixed = Filter(must=(MatchAny("text", ("t5", "t6", 123)),))
    assert {h.id for h in await index.search("mem", vec(0), filter=mixed, limit=n)} == {5, 6}
    none = Filter(must=(MatchAny("user", ()),))
    assert await index.search("mem", vec(0), filter=none, limit=n) == []
    assert len(await index.search("mem", vec(0), filter=Filter(), limit=n)) == n


async def test_count_ids_retrieve(index: VectorIndex) -> None:
    await filled(index, 25)
    assert await index.count("mem") == 25
    if isinstance(index, EdgeVectorIndex):
        index._page_size = 10  # force several pages
    else:
        index._page_size = 10  # type: ignore[attr-defined]
    pages = [page async for page in index.ids("mem")]
    assert len(pages) >= 3
    assert sorted(i for p in pages for i in p) == list(range(25))
    assert await index.retrieve_ids("mem", [0, 5, 24, 25, 1000]) == {0, 5, 24}
    assert await index.retrieve_ids("mem", []) == set()


async def test_collection_dimension_and_drop(index: VectorIndex) -> None:
    assert await index.collection_dimension("mem") is None
    await filled(index)
    assert await index.collection_dimension("mem") == DIM
    with pytest.raises(DimensionMismatch):
        await index.ensure_collection("mem", DIM * 2, FIELDS)
    await index.drop_collection("mem")
    assert await index.collection_dimension("mem") is None
    with pytest.raises(CollectionNotFound):
        await index.count("mem")
    await index.ensure_collection("mem", 4, {})
    assert await index.collection_dimension("mem") == 4
    assert await index.count("mem") == 0
    assert await index.check() is None


async def test_edge_reopen_persists(tmp_path: Path) -> None:
    d = tmp_path / "vectors"
    a = EdgeVectorIndex(d)
    await a.ensure_collection("mem", DIM, FIELDS)
    await a.upsert("mem", [point(i) for i in range(20)])
    await a.delete("mem", [4])
    await a.close()

    b = EdgeVectorIndex(d)
    try:
        assert await b.collection_dimension("mem") == DIM
        assert await b.count("mem") == 19
        await b.ensure_collection("mem", DIM, FIELDS)
        hits = await b.search("mem", vec(9), filter=Filter(must=(MatchAny("user", (0,)),)), limit=3)
        assert hits[0].id == 9 and hits[0].payload["user"] == 0
        # a second opener of the same directory is refused clearly, not corrupted
        c = EdgeVectorIndex(d)
        with pytest.raises(VectorIndexLocked):
            await c.count("mem")
        await c.close()
    finally:
        await b.close()


def test_edge_survives_kill_without_close(tmp_path: Path) -> None:
    """Writes acknowledged by upsert()/delete() survive the process being SIGKILLed."""
    d = tmp_path / "vectors"
    script = textwrap.dedent(f"""
        import asyncio, os, signal
        from nexus_grpc.vectors import EdgeVectorIndex, VectorPoint
        async def main():
            idx = EdgeVectorIndex({str(d)!r})
            await idx.ensure_collection("mem", 4, {{"user": "integer"}})
            await idx.upsert("mem", [VectorPoint(i, [1.0, i, 0.0, 1.0], {{"user": i}})
                                     for i in range(50)])
            await idx.delete("mem", [0])
            os.kill(os.getpid(), signal.SIGKILL)
        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr.decode()

    import asyncio

    async def reopen() -> tuple[int, set[int]]:
        idx = EdgeVectorIndex(d)
        try:
            return await idx.count("mem"), await idx.retrieve_ids("mem", [0, 1, 49])
        finally:
            await idx.close()

    assert asyncio.run(reopen()) == (49, {1, 49})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_remote_unreachable() -> None:
    idx = QdrantVectorIndex(url=f"http://127.0.0.1:{_closed_port()}", timeout=2)
    try:
        with pytest.raises(VectorIndexUnavailable):
            await idx.upsert("mem", [point(1)])
        with pytest.raises(VectorIndexUnavailable):
            await idx.search("mem", vec(1), filter=None, limit=3)
        reason = await idx.check()
        assert reason and "unreachable" in reason
    finally:
        await idx.close()


async def test_closed_edge_index(tmp_path: Path) -> None:
    idx = EdgeVectorIndex(tmp_path)
    await idx.close()
    assert await idx.check() == "vector index is closed"
    with pytest.raises(RuntimeError):
        await idx.count("mem")
