"""The query-vector cache: the real MiniLM model and the real Ollama client
against the Ollama stand-in, then a served SearchEpisodes and readiness probe.

Its size as a setting (the default, zero for none, a size refused) is
tests/unit/test_embedding_choice.py's."""

from __future__ import annotations

import asyncio

import pytest

from nexus_grpc.embedding import MiniLMEmbedder, OllamaEmbedder, QueryVectorCache
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as m
from tests.e2e.server.test_metrics import sample, scrape
from tests.ollama_stub import OllamaStub
from tests.support import start_harness, wait_until

EMBED = "/api/embed"


async def test_a_repeated_query_is_the_models_own_vector_without_running_it() -> None:
    model = MiniLMEmbedder()
    cache = QueryVectorCache(model, capacity=8)
    try:
        first = await cache.embed_query("what does the user enjoy, coffee or tea?")
        runs = model._queries.batches
        again = await cache.embed_query("what does the user enjoy, coffee or tea?")
        assert model._queries.batches == runs  # answered without the model
        # Bit for bit what the model answers: ranking cannot change.
        assert again == first == await model.embed_query("what does the user enjoy, coffee or tea?")
        assert (cache.hits, cache.misses) == (1, 1)
        other = await cache.embed_query("what does the user enjoy, coffee or juice?")
        assert other != first and model._queries.batches > runs
    finally:
        await cache.close()


async def test_a_returned_vector_can_be_changed_without_changing_the_cache() -> None:
    model = MiniLMEmbedder()
    cache = QueryVectorCache(model, capacity=8)
    try:
        vector = await cache.embed_query("postgres replication latency")
        kept = list(vector)
        vector[0] = 42.0
        assert await cache.embed_query("postgres replication latency") == kept
    finally:
        await cache.close()


async def test_concurrent_callers_share_one_embedding(stub: OllamaStub) -> None:
    cache = QueryVectorCache(OllamaEmbedder(stub.url, dimension=384), capacity=8)
    try:
        vectors = await asyncio.gather(*(cache.embed_query("deadline moved") for _ in range(8)))
        assert len(stub.requests_to(EMBED)) == 1
        assert all(v == vectors[0] for v in vectors) and len(vectors[0]) == 384
        assert (cache.hits, cache.misses) == (7, 1)
    finally:
        await cache.close()


async def test_a_cancelled_caller_does_not_cancel_the_others(stub: OllamaStub) -> None:
    cache = QueryVectorCache(OllamaEmbedder(stub.url, dimension=384), capacity=8)
    stub.delay(0.5)  # the embedding is still in flight when the first caller leaves
    try:
        leaving = asyncio.create_task(cache.embed_query("budget approval"))
        staying = asyncio.create_task(cache.embed_query("budget approval"))
        await stub.wait_for_requests(1, path=EMBED)
        leaving.cancel()
        vector = await staying
        assert leaving.cancelled() and len(vector) == 384
        assert len(stub.requests_to(EMBED)) == 1
        stub.clear_faults()
        assert await cache.embed_query("budget approval") == vector  # and it was kept
        assert len(stub.requests_to(EMBED)) == 1
    finally:
        await cache.close()


async def test_a_failure_is_not_remembered(stub: OllamaStub) -> None:
    cache = QueryVectorCache(OllamaEmbedder(stub.url, dimension=384), capacity=8)
    try:
        stub.fail_with(503, "loading model")
        with pytest.raises(Exception, match="503"):
            await cache.embed_query("water the plants")
        assert len(cache) == 0
        stub.clear_faults()
        assert len(await cache.embed_query("water the plants")) == 384
        assert len(stub.requests_to(EMBED)) == 2
    finally:
        await cache.close()


async def test_the_least_recently_used_text_goes_first(stub: OllamaStub) -> None:
    cache = QueryVectorCache(OllamaEmbedder(stub.url, dimension=384), capacity=2)
    try:
        await cache.embed_query("one")
        await cache.embed_query("two")
        await cache.embed_query("one")  # "two" is now the least recently used
        await cache.embed_query("three")
        assert len(cache) == 2 and len(stub.requests_to(EMBED)) == 3
        await cache.embed_query("one")
        assert len(stub.requests_to(EMBED)) == 3
        await cache.embed_query("two")
        assert len(stub.requests_to(EMBED)) == 4
    finally:
        await cache.close()


async def test_documents_are_never_cached(stub: OllamaStub) -> None:
    cache = QueryVectorCache(OllamaEmbedder(stub.url, dimension=384), capacity=8)
    try:
        await cache.embed(["an episode"])
        await cache.embed(["an episode"])
        assert len(stub.requests_to(EMBED)) == 2 and len(cache) == 0
    finally:
        await cache.close()


async def test_a_served_search_asked_twice_embeds_once_and_the_probe_asks_the_model(
    tmp_path, stub: OllamaStub
) -> None:
    h = await start_harness(
        tmp_path / "data",
        embedder=OllamaEmbedder(stub.url, dimension=384),
        metrics_listen="127.0.0.1:0",
    )
    try:
        assert isinstance(h.app.query_cache, QueryVectorCache)
        session = await h.memory.CreateSession(
            m.CreateSessionRequest(session=m.Session(name="cache"))
        )
        episode = await h.memory.CreateEpisode(
            m.CreateEpisodeRequest(
                session_id=session.id,
                user_message="the staging branch tests fail",
                ai_response="the config points at an old endpoint",
            )
        )

        # Its state DONE, not only its point written: the indexer marks the row
        # after the upsert, and a search between the two shows it PENDING.
        async def indexed() -> bool:
            got = await h.memory.GetEpisode(m.GetEpisodeRequest(id=episode.id))
            return got.embedding_state == m.JOB_STATE_DONE

        await wait_until(indexed)
        ask = m.SearchEpisodesRequest(
            query="why do the staging tests fail?",
            session_id=session.id,
            mode=m.SEARCH_MODE_SEMANTIC,
        )
        before = len(stub.requests_to(EMBED))
        first = [hit async for hit in h.memory.SearchEpisodes(ask)]
        second = [hit async for hit in h.memory.SearchEpisodes(ask)]
        assert first == second and len(first) == 1
        assert len(stub.requests_to(EMBED)) == before + 1

        samples = await scrape(h)
        assert sample(samples, "nexus_query_vector_lookups_total", source="cache") == 1
        assert sample(samples, "nexus_query_vector_lookups_total", source="model") == 1

        # Readiness asks the model itself, never the cache: Ollama down is not ready.
        stub.fail_with(503)
        status = await h.memory.GetServiceStatus(m.GetServiceStatusRequest())
        embedder = next(d for d in status.dependencies if d.name == "embedder")
        assert not embedder.ok and "503" in embedder.detail
    finally:
        await h.close()


async def test_zero_serves_without_a_cache(tmp_path, stub: OllamaStub) -> None:
    h = await start_harness(
        tmp_path / "data", embedder=OllamaEmbedder(stub.url, dimension=384), query_vector_cache=0
    )
    try:
        assert h.app.query_cache is None and isinstance(h.app.embedder, OllamaEmbedder)
    finally:
        await h.close()
