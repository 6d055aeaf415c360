"""Fixtures the LLM client tests share (the package-wide ones are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from nexus_grpc.llm import OllamaClient
from tests.ollama_stub import OllamaStub


@pytest.fixture
async def llm(stub: OllamaStub) -> AsyncIterator[OllamaClient]:
    """The Ollama client, talking to the stand-in (the ``stub`` fixture)."""
    client = OllamaClient(stub.url, timeout=5)
    yield client
    await client.close()
