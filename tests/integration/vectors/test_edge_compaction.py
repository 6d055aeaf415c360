"""qdrant-edge keeps a deleted point's vector and payload in its segments and
its WAL; ``EdgeVectorIndex.compact`` rewrites the collection with only the
points that exist (docs/privacy.md). Proved on the real engine: no byte of a
deleted point is left, searches running meanwhile never fail, a point written
during the copy survives it, and a crash at any moment of the swap leaves a
whole collection."""

from __future__ import annotations

import asyncio
import os
import shutil

import numpy as np
import pytest

from nexus_grpc.core.vectors import VectorPoint
from nexus_grpc.vectors.edge import _NEW, _OLD, DELETED_FILE, EdgeVectorIndex

DIM = 32


def _vector(rng: np.random.Generator) -> list[float]:
    return rng.random(DIM).astype(np.float32).tolist()


def _on_disk(path, needle: bytes) -> bool:
    return any(needle in p.read_bytes() for p in path.rglob("*") if p.is_file())


def _unit_bytes(vector: list[float]) -> bytes:
    """How the engine stores a cosine vector: normalised float32 (a prefix)."""
    v = np.asarray(vector, dtype=np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32).tobytes()[:16]


def rows(ids: set[int]):
    """The store's answer to which rows exist."""

    async def live() -> set[int]:
        return ids

    return live


@pytest.fixture
async def index(tmp_path):
    ix = EdgeVectorIndex(tmp_path / "vectors", page_size=200)
    await ix.ensure_collection("episodes", DIM, {"userId": "keyword"})
    yield ix
    await ix.close()


async def test_a_compaction_leaves_no_byte_of_a_deleted_point(index, tmp_path):
    rng = np.random.default_rng(7)
    vectors = {i: _vector(rng) for i in range(1, 1001)}
    await index.upsert(
        "episodes",
        [
            VectorPoint(i, v, {"userId": "gonegonegone" if i <= 50 else f"u{i}"})
            for i, v in vectors.items()
        ],
    )
    await index.delete("episodes", list(range(1, 51)))
    path = tmp_path / "vectors"
    assert _on_disk(path, b"gonegonegone"), "deleted points kept nothing: nothing to prove"
    assert (path / "episodes" / DELETED_FILE).exists()
    assert await index.compact("episodes", rows(set(range(51, 1001)))) == 0
    assert not _on_disk(path, b"gonegonegone")
    assert not any(_on_disk(path, _unit_bytes(vectors[i])) for i in range(1, 51))
    assert _on_disk(path, _unit_bytes(vectors[600]))
    assert await index.count("episodes") == 950
    [hit] = await index.search("episodes", vectors[600], filter=None, limit=1)
    assert hit.id == 600 and hit.payload == {"userId": "u600"}
    # Nothing deleted since: the next compaction has nothing to do.
    assert not (path / "episodes" / DELETED_FILE).exists()
    assert sorted(p.name for p in path.iterdir()) == ["episodes"]


async def test_points_left_behind_are_dropped_and_writes_during_the_copy_survive(index):
    rng = np.random.default_rng(8)
    await index.upsert("episodes", [VectorPoint(i, _vector(rng), {}) for i in range(1, 2001)])
    await index.delete("episodes", [1])
    errors: list[str] = []
    searches = 0
    done = asyncio.Event()

    async def search() -> None:
        nonlocal searches
        while not done.is_set():
            try:
                await index.search("episodes", _vector(rng), filter=None, limit=5)
                searches += 1
            except Exception as exc:  # a search must never fail for a compaction
                errors.append(repr(exc))
            await asyncio.sleep(0)

    # The store's rows: 10's point is one the store no longer holds a row
    # for (the compaction drops it); the write below adds a row and its
    # point, and deletes another, while the compaction runs.
    store = set(range(2, 2001)) - {10}

    async def live() -> set[int]:
        return set(store)

    async def write() -> None:
        store.add(5000)
        await index.upsert("episodes", [VectorPoint(5000, _vector(rng), {"late": "yes"})])
        store.discard(2)
        await index.delete("episodes", [2])

    searchers = [asyncio.create_task(search()) for _ in range(3)]
    compaction = asyncio.create_task(index.compact("episodes", live))
    await asyncio.sleep(0)  # the compaction starts tracking the writes
    await write()
    dropped = await compaction
    done.set()
    await asyncio.gather(*searchers)
    assert errors == [] and searches > 0
    # 10; and 5000 too when its page was copied before its row was read (it
    # is copied again at the swap, as every point written meanwhile is).
    assert dropped in (1, 2)
    assert await index.retrieve_ids("episodes", [1, 2, 10, 5000]) == {5000}
    assert await index.count("episodes") == 1998


@pytest.mark.parametrize("moment", ["before the swap", "between the renames", "after them"])
async def test_a_crash_during_the_swap_leaves_a_whole_collection(tmp_path, moment):
    rng = np.random.default_rng(9)
    path = tmp_path / "vectors"
    ix = EdgeVectorIndex(path)
    await ix.ensure_collection("episodes", DIM, {})
    await ix.upsert("episodes", [VectorPoint(i, _vector(rng), {}) for i in range(1, 101)])
    await ix.close()
    home, new, old = path / "episodes", path / f"episodes{_NEW}", path / f"episodes{_OLD}"
    shutil.copytree(home, new)  # a copy as whole as the compaction's
    if moment == "between the renames":
        os.replace(home, old)
    elif moment == "after them":
        shutil.copytree(home, old)
    again = EdgeVectorIndex(path)
    try:
        assert await again.count("episodes") == 100
    finally:
        await again.close()
    assert sorted(p.name for p in path.iterdir()) == ["episodes"]
