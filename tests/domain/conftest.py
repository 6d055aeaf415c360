"""Fixtures the domain tests share (the package-wide ones are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from nexus_grpc.vectors import QdrantVectorIndex
from tests.graph_support import start_graph_harness
from tests.ollama_stub import OllamaStub
from tests.support import Harness, start_harness


@pytest.fixture
async def llm_harness(
    tmp_path, stub: OllamaStub, store_settings: dict[str, str]
) -> AsyncIterator[Harness]:
    """A harness whose LLM is the Ollama stand-in (summaries, selection), on the
    module's store (both, where the module sets BOTH_STORES)."""
    h = await start_harness(tmp_path / "data", ollama_url=stub.url, **store_settings)
    yield h
    await h.close()


@pytest.fixture
async def gh(
    tmp_path, stub: OllamaStub, store_settings: dict[str, str]
) -> AsyncIterator[Harness]:
    """A harness with the graph's extraction running against the Ollama stand-in,
    on the module's store."""
    h = await start_graph_harness(tmp_path / "data", stub, **store_settings)
    yield h
    await h.close()


@pytest.fixture(params=["edge", "qdrant-local", "postgresql"])
async def each_backend(request, tmp_path) -> AsyncIterator[Harness]:
    """A harness on each search backend in turn: the embedded qdrant-edge index,
    Qdrant (its local mode), and PostgreSQL with pgvector beside the rows (keyword
    search then on PostgreSQL's tsvector)."""
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_url")
        harness = await start_harness(tmp_path / "data", database_url=url)
    else:
        index = QdrantVectorIndex(location=":memory:") if request.param == "qdrant-local" else None
        harness = await start_harness(tmp_path / "data", index=index)
    yield harness
    await harness.close()
