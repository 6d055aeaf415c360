"""Fixtures the domain tests share (the package-wide ones, llm_harness and gh
among them, are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from nexus_grpc.vectors import QdrantVectorIndex
from tests.support import Harness, start_harness


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
