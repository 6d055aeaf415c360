"""Reading an embedded shard into the page cache after it is opened (vectors/prewarm.py)."""

from __future__ import annotations

import math
from pathlib import Path

from nexus_grpc.vectors import EdgeVectorIndex, Filter, MatchAny, VectorPoint
from nexus_grpc.vectors.prewarm import CHUNK, PageCacheWarmer, shard_files

DIM = 8


def vec(i: int) -> list[float]:
    v = [math.cos(i * 0.3 + k) for k in range(DIM)]
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def fake_shard(root: Path) -> None:
    seg = root / "segments" / "s1"
    for rel, size in {
        "payload_storage/page_0.dat": 3000,
        "vector_storage/vectors/chunk_0.mmap": 5000,
        "payload_index/user/flags.dat": 1000,
        "segment.json": 10,
    }.items():
        (seg / rel).parent.mkdir(parents=True, exist_ok=True)
        (seg / rel).write_bytes(b"x" * size)
    (root / "wal").mkdir()
    (root / "wal" / "open-1").write_bytes(b"w" * 9999)


def test_files_are_read_vectors_first_and_never_the_wal(tmp_path: Path) -> None:
    fake_shard(tmp_path)
    names = [p.name for p in shard_files(tmp_path)]
    assert names == ["chunk_0.mmap", "flags.dat", "page_0.dat", "segment.json"]
    assert shard_files(tmp_path / "missing") == []


def test_budget_bounds_reading(tmp_path: Path) -> None:
    fake_shard(tmp_path)
    everything = PageCacheWarmer(1 << 30)
    assert everything.warm(shard_files(tmp_path)) == 5000 + 1000 + 3000 + 10

    bounded = PageCacheWarmer(5500)
    assert bounded.warm(shard_files(tmp_path)) == 5500
    # The budget is shared by every later call (one per collection).
    assert bounded.warm(shard_files(tmp_path)) == 0
    assert bounded.read_bytes == 5500


def test_holes_of_sparse_files_are_not_read(tmp_path: Path) -> None:
    sparse = tmp_path / "segments" / "s" / "vector_storage" / "chunk_0.mmap"
    sparse.parent.mkdir(parents=True)
    with sparse.open("wb") as f:
        f.write(b"v" * 4096)
        f.truncate(32 * CHUNK)  # the rest is a hole, as in qdrant's preallocated chunks
    assert PageCacheWarmer(1 << 30).warm(shard_files(tmp_path)) < 1 << 20


def test_stop_ends_reading_between_chunks(tmp_path: Path) -> None:
    big = tmp_path / "segments" / "s" / "vector_storage" / "v.mmap"
    big.parent.mkdir(parents=True)
    big.write_bytes(b"\1" * (CHUNK * 3))
    warmer = PageCacheWarmer(1 << 30)
    warmer.stop()
    assert warmer.warm(shard_files(tmp_path)) == 0

    # A file that vanishes between listing and reading is skipped, not an error.
    ghost = tmp_path / "segments" / "s" / "vector_storage" / "gone.mmap"
    assert PageCacheWarmer(1 << 30).warm([ghost, big]) == CHUNK * 3


async def test_index_warms_shards_it_opens_and_still_answers(disk_path: Path) -> None:
    # On disk (tests/conftest.py): on a tmpfs the pages qdrant reads are allocated.
    d = disk_path / "vectors"
    writer = EdgeVectorIndex(d)
    await writer.ensure_collection("mem", DIM, {"user": "integer"})
    await writer.upsert("mem", [VectorPoint(i, vec(i), {"user": i % 2}) for i in range(50)])
    await writer.close()

    # Allocated blocks: the vector chunks are sparse 32 MB files, mostly holes.
    on_disk = sum(p.stat().st_blocks * 512 for p in shard_files(d / "mem"))
    reopened = EdgeVectorIndex(d, prewarm_bytes=1 << 30)
    try:
        await reopened.ensure_collection("mem", DIM, {"user": "integer"})
        read = await reopened.prewarm_finished()
        # At most the allocated blocks (start-up writes may add a few while it reads).
        assert 0 < read <= on_disk * 1.1
        assert read < sum(p.stat().st_size for p in shard_files(d / "mem")) / 4
        hits = await reopened.search(
            "mem", vec(7), filter=Filter(must=(MatchAny("user", (1,)),)), limit=1
        )
        assert hits[0].id == 7
    finally:
        await reopened.close()

    off = EdgeVectorIndex(d)  # the default reads nothing
    try:
        await off.count("mem")
        assert await off.prewarm_finished() == 0
    finally:
        await off.close()
