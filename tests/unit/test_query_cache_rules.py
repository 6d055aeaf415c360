"""The query-vector cache's rules (embedding/query_cache.py), on an embedder
that returns fixed vectors without a model: a repeated query is answered from
the cache with the embedder's own floats, concurrent callers share one
embedding, a cancelled caller does not cancel it for the others, a failure is
not kept, the least recently used text goes first, documents pass through.

The same cache in front of the real MiniLM model, and served behind
SearchEpisodes with the Ollama stand-in, is
tests/integration/embedding/test_query_cache.py's."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from nexus_grpc.embedding import QueryVectorCache

DIM = 4


class FixedEmbedder:
    """An embedder without a model: each text's vector is made from its
    characters; every call is counted; ``started`` is set by the first query
    call, ``gate`` holds query calls until set; ``failing`` makes them raise."""

    model_id = "fixed"
    dimension = DIM
    similarity_temperature = 0.05
    similarity_floor = -1.0

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.documents: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.started = asyncio.Event()
        self.failing: Exception | None = None
        self.closed = False

    @staticmethod
    def vector(text: str) -> list[float]:
        # Floats a float64 holds exactly but that are not round numbers.
        return [(sum(map(ord, text)) % 97) / 7.0 + k / 3.0 for k in range(DIM)]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.documents.append(list(texts))
        return [self.vector(t) for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.failing is not None:
            raise self.failing
        return self.vector(text)

    def warm(self) -> str:
        return "warmed"

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
async def model() -> FixedEmbedder:
    return FixedEmbedder()


async def test_a_repeated_query_is_the_embedders_own_vector_without_asking_it_again(
    model: FixedEmbedder,
) -> None:
    cache = QueryVectorCache(model, capacity=8)
    first = await cache.embed_query("what does the user enjoy, coffee or tea?")
    again = await cache.embed_query("what does the user enjoy, coffee or tea?")
    assert model.queries == ["what does the user enjoy, coffee or tea?"]
    # Bit for bit what the embedder answered: ranking cannot change.
    assert again == first == FixedEmbedder.vector("what does the user enjoy, coffee or tea?")
    assert (cache.hits, cache.misses) == (1, 1)
    other = await cache.embed_query("what does the user enjoy, coffee or juice?")
    assert other != first and len(model.queries) == 2
    assert (cache.hits, cache.misses) == (1, 2)


async def test_a_returned_vector_can_be_changed_without_changing_the_cache(
    model: FixedEmbedder,
) -> None:
    cache = QueryVectorCache(model, capacity=8)
    vector = await cache.embed_query("postgres replication latency")
    kept = list(vector)
    vector[0] = 42.0
    assert await cache.embed_query("postgres replication latency") == kept


async def test_concurrent_callers_share_one_embedding(model: FixedEmbedder) -> None:
    cache = QueryVectorCache(model, capacity=8)
    vectors = await asyncio.gather(*(cache.embed_query("deadline moved") for _ in range(8)))
    assert model.queries == ["deadline moved"]
    assert all(v == vectors[0] for v in vectors) and len(vectors[0]) == DIM
    assert (cache.hits, cache.misses) == (7, 1)


async def test_a_cancelled_caller_does_not_cancel_the_others(model: FixedEmbedder) -> None:
    cache = QueryVectorCache(model, capacity=8)
    model.gate = asyncio.Event()  # the embedding is in flight when the first caller leaves
    leaving = asyncio.create_task(cache.embed_query("budget approval"))
    staying = asyncio.create_task(cache.embed_query("budget approval"))
    await model.started.wait()
    leaving.cancel()
    await asyncio.wait({leaving})
    model.gate.set()
    vector = await staying
    assert leaving.cancelled() and vector == FixedEmbedder.vector("budget approval")
    assert model.queries == ["budget approval"]
    assert await cache.embed_query("budget approval") == vector  # and it was kept
    assert model.queries == ["budget approval"]


async def test_a_failure_is_not_remembered(model: FixedEmbedder) -> None:
    cache = QueryVectorCache(model, capacity=8)
    model.failing = RuntimeError("503 loading model")
    with pytest.raises(RuntimeError, match="503"):
        await cache.embed_query("water the plants")
    assert len(cache) == 0
    model.failing = None
    assert await cache.embed_query("water the plants") == FixedEmbedder.vector("water the plants")
    assert model.queries == ["water the plants", "water the plants"]
    assert len(cache) == 1


async def test_the_least_recently_used_text_goes_first(model: FixedEmbedder) -> None:
    cache = QueryVectorCache(model, capacity=2)
    await cache.embed_query("one")
    await cache.embed_query("two")
    await cache.embed_query("one")  # "two" is now the least recently used
    await cache.embed_query("three")
    assert len(cache) == 2 and model.queries == ["one", "two", "three"]
    await cache.embed_query("one")
    assert model.queries == ["one", "two", "three"]
    await cache.embed_query("two")
    assert model.queries == ["one", "two", "three", "two"]


async def test_documents_are_never_cached(model: FixedEmbedder) -> None:
    cache = QueryVectorCache(model, capacity=8)
    assert await cache.embed(["an episode"]) == [FixedEmbedder.vector("an episode")]
    await cache.embed(["an episode"])
    assert model.documents == [["an episode"], ["an episode"]] and len(cache) == 0
    assert model.queries == []


async def test_the_cache_speaks_for_its_embedder_and_closes_it(model: FixedEmbedder) -> None:
    cache = QueryVectorCache(model, capacity=8)
    # The Embedder protocol's attributes are the model's own.
    assert (cache.model_id, cache.dimension) == ("fixed", DIM)
    assert (cache.similarity_temperature, cache.similarity_floor) == (0.05, -1.0)
    assert cache.warm() == "warmed"  # whatever else the backend offers
    with pytest.raises(AttributeError):
        cache.no_such_thing  # noqa: B018
    await cache.embed_query("kept")
    await cache.close()
    assert model.closed and len(cache) == 0
