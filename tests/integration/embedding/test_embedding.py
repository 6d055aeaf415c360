"""Embedders: the real offline E5 and MiniLM models, and the Ollama client against a
fake server.

Which embedder the settings make (make_embedder), built but never run, is
tests/unit/test_embedding_choice.py's; the lanes of an in-process embedder on a
model without weights (a large call split across threads and kept in order,
queries on their own lane, nothing run once closed, indexing threads below
normal priority) and E5's missing engine are tests/unit/test_lanes_local_embedder.py's."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from nexus_grpc.embedding import (
    E5Embedder,
    Embedder,
    EmbedderUnavailable,
    EmbeddingDimensionMismatch,
    MiniLMEmbedder,
    OllamaEmbedder,
)


@pytest.fixture
async def minilm() -> AsyncIterator[MiniLMEmbedder]:
    e = MiniLMEmbedder()
    await e.warm()
    yield e
    await e.close()


def _cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture
async def e5() -> AsyncIterator[E5Embedder]:
    e = E5Embedder(threads=2)
    await e.warm()
    yield e
    await e.close()


async def test_e5_shape_and_unit_norm(e5: E5Embedder) -> None:
    vecs = await e5.embed(["hello world", "", "x" * 5000])
    assert len(vecs) == 3
    for v in vecs:
        assert len(v) == 384
        assert abs(np.linalg.norm(v) - 1.0) < 1e-4
    assert await e5.embed([]) == []
    assert abs(np.linalg.norm(await e5.embed_query("hello world")) - 1.0) < 1e-4


async def test_e5_embeds_queries_and_documents_differently(e5: E5Embedder) -> None:
    # "query: " and "passage: " prefixes: the same words, two different vectors,
    # and a question lands nearer its answer as a query than as a passage.
    question = "Where did Caroline move from four years ago?"
    answer = "Caroline: I moved here from Sweden four years ago, it was a big change."
    other = "Melanie: The recipe calls for two cups of flour and a pinch of salt."
    as_query = await e5.embed_query(question)
    [as_passage, answer_v, other_v] = await e5.embed([question, answer, other])
    assert _cos(as_query, as_passage) < 0.999
    assert _cos(as_query, answer_v) > _cos(as_query, other_v) + 0.05


async def test_e5_concurrent_calls_match_single_ones(e5: E5Embedder) -> None:
    # The engine is called from the indexing threads and the query lane at once.
    texts = [
        f"note {i}: " + "we talked about the garden and the trip " * (i % 5) for i in range(24)
    ]
    alone = [(await e5.embed([t]))[0] for t in texts[:4]]
    together = await asyncio.gather(e5.embed(texts), *(e5.embed_query(t) for t in texts[:8]))
    for a, b in zip(alone, together[0][:4], strict=True):
        assert _cos(a, b) > 0.999
    queries = [await e5.embed_query(t) for t in texts[:8]]
    for a, b in zip(queries, together[1:], strict=True):
        assert _cos(a, b) > 0.999


async def test_minilm_shape_and_unit_norm(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.dimension == 384
    assert minilm.model_id == "all-MiniLM-L6-v2-onnx-int8"
    vecs = await minilm.embed(["hello world", "", "x" * 5000])
    assert len(vecs) == 3
    for v in vecs:
        assert len(v) == 384
        assert abs(np.linalg.norm(v) - 1.0) < 1e-4
    assert await minilm.embed([]) == []


async def test_minilm_paraphrase_closer_than_unrelated(minilm: MiniLMEmbedder) -> None:
    q, para, other = await minilm.embed(
        [
            "How do I reset my password?",
            "I forgot my login credentials and need to change them",
            "The recipe calls for two cups of flour and a pinch of salt.",
        ]
    )
    assert _cos(q, para) > _cos(q, other) + 0.2


async def test_minilm_batch_equals_single(minilm: MiniLMEmbedder) -> None:
    texts = [f"note {i}: " + "lorem ipsum dolor " * (i % 9) for i in range(40)]
    batch = await minilm.embed(texts)
    for i in (0, 5, 17, 39):  # padding to different lengths must not change results
        (single,) = await minilm.embed([texts[i]])
        assert _cos(batch[i], single) > 0.999


async def test_minilm_does_not_block_event_loop(minilm: MiniLMEmbedder) -> None:
    ticks = 0
    max_gap = 0.0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks, max_gap
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            max_gap = max(max_gap, now - last)
            last = now
            ticks += 1

    task = asyncio.create_task(ticker())
    texts = [f"memory {i}: the user mentioned their favourite colour is {i}" * 3 for i in range(64)]
    started = time.perf_counter()
    vecs = await minilm.embed(texts)
    elapsed = time.perf_counter() - started
    stop.set()
    await task
    assert len(vecs) == 64
    assert ticks >= max(3, int(elapsed / 0.05)), (ticks, elapsed)
    assert max_gap < 0.2, f"event loop stalled for {max_gap * 1000:.0f} ms"


# -- Ollama against an in-test HTTP server ---------------------------------------------------


class _FakeOllama(BaseHTTPRequestHandler):
    dim = 8
    requests: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        if self.path != "/api/embed":
            self.send_error(404)
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if body["model"] == "missing":
            self._reply(404, {"error": f'model "{body["model"]}" not found'})
            return
        # Deterministic, unnormalised vectors so the client's normalisation is exercised.
        embs = [[float(len(t) + 1)] + [1.0] * (self.dim - 1) for t in inputs]
        self._reply(200, {"model": body["model"], "embeddings": embs})

    def _reply(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_ollama() -> Iterator[str]:
    _FakeOllama.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOllama)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_ollama_embed(fake_ollama: str) -> None:
    e = OllamaEmbedder(fake_ollama, model="tiny", dimension=8, batch_size=2)
    try:
        vecs = await e.embed(["a", "bbb", "cc"])
        assert len(vecs) == 3 and all(len(v) == 8 for v in vecs)
        for v in vecs:
            assert abs(np.linalg.norm(v) - 1.0) < 1e-5
        assert vecs[0] != vecs[1]
        # batched into requests of 2, model passed through
        assert [r["input"] for r in _FakeOllama.requests] == [["a", "bbb"], ["cc"]]
        assert {r["model"] for r in _FakeOllama.requests} == {"tiny"}
    finally:
        await e.close()


async def test_ollama_dimension_mismatch(fake_ollama: str) -> None:
    e = OllamaEmbedder(fake_ollama, model="tiny", dimension=768)
    with pytest.raises(EmbeddingDimensionMismatch, match="768"):
        await e.embed(["a"])
    await e.close()


async def test_ollama_http_error_is_unavailable(fake_ollama: str) -> None:
    e = OllamaEmbedder(fake_ollama, model="missing", dimension=8)
    with pytest.raises(EmbedderUnavailable, match="404"):
        await e.embed(["a"])
    await e.close()


async def test_ollama_closed_port_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    e = OllamaEmbedder(f"http://127.0.0.1:{port}", dimension=8, timeout=2)
    with pytest.raises(EmbedderUnavailable):
        await e.embed(["a"])
    await e.close()


async def test_minilm_batches_stay_within_the_token_budget(minilm: MiniLMEmbedder) -> None:
    from nexus_grpc.embedding.minilm import BATCH_TOKENS

    shapes: list[tuple[int, int]] = []
    run = minilm._embed_batch

    def recording(ids, mask):
        shapes.append(ids.shape)
        return run(ids, mask)

    minilm._embed_batch = recording  # type: ignore[method-assign]
    texts = ["short note"] * 40 + ["a much longer note " * 90] * 40
    vectors = await minilm.embed(texts)
    assert sum(rows for rows, _ in shapes) == len(texts)
    assert all(rows * width <= BATCH_TOKENS or rows == 1 for rows, width in shapes)
    assert max(width for _, width in shapes) == 256  # long texts are truncated, not dropped
    assert _cos(vectors[0], vectors[39]) > 0.9999 and _cos(vectors[40], vectors[79]) > 0.9999


async def test_minilm_large_call_is_split_across_threads_in_order() -> None:
    texts = [f"note {i}: " + "word " * (i % 37) for i in range(75)]
    two, one = MiniLMEmbedder(threads=2), MiniLMEmbedder(threads=1)
    try:
        split, whole = await two.embed(texts), await one.embed(texts)
    finally:
        await two.close()
        await one.close()
    assert len(split) == len(texts)
    assert all(_cos(a, b) > 0.9999 for a, b in zip(split, whole, strict=True))
    assert _cos(split[0], split[1]) < 0.999  # distinct texts stay distinct, in their places
