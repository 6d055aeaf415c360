"""The query-vector cache in front of the real MiniLM model (a hit is the
model's own vector, bit for bit), then with the real Ollama client against the
Ollama stand-in behind a served SearchEpisodes and readiness probe.

Its rules (a hit without the embedder, a returned vector the caller may
change, concurrent callers sharing one embedding, a cancelled caller, a
failure not kept, least recently used out first, documents not cached) are
tests/unit/test_query_cache_rules.py's, on an embedder without a model; its
size as a setting (the default, zero for none, a size refused) is
tests/unit/test_embedding_choice.py's."""

from __future__ import annotations

from nexus_grpc.embedding import MiniLMEmbedder, OllamaEmbedder, QueryVectorCache
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as m
from tests.metrics_scrape import sample, scrape
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
