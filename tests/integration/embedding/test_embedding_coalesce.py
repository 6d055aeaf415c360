"""Concurrent single-text embeds (search queries) share model runs: the real
MiniLM model answers coalesced queries as it answers each alone.

How the lane batches, on a stand-in model (who shares a batch, two lanes at
once, a cancelled caller, a failed run), is tests/unit/test_embedding_coalesce.py's."""

from __future__ import annotations

import asyncio

import numpy as np

from nexus_grpc.embedding import MiniLMEmbedder


async def test_minilm_concurrent_queries_match_single_runs_with_fewer_model_runs():
    e = MiniLMEmbedder()
    await e.warm()
    try:
        texts = [f"what did we decide about topic {i} last week" for i in range(24)]
        alone = [await e.embed_query(t) for t in texts]
        runs_before = e._queries.batches
        together = await asyncio.gather(*[e.embed_query(t) for t in texts])
        for a, b in zip(alone, together, strict=True):
            assert float(np.dot(a, b)) > 0.9999
        assert e._queries.batches - runs_before < len(texts)
    finally:
        await e.close()
