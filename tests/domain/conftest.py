"""Fixtures the domain tests share (the package-wide ones are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.graph_support import start_graph_harness
from tests.ollama_stub import OllamaStub
from tests.support import Harness, start_harness


@pytest.fixture
async def llm_harness(tmp_path, stub: OllamaStub) -> AsyncIterator[Harness]:
    """A harness whose LLM is the Ollama stand-in (summaries, selection)."""
    h = await start_harness(tmp_path / "data", ollama_url=stub.url)
    yield h
    await h.close()


@pytest.fixture
async def gh(tmp_path, stub: OllamaStub) -> AsyncIterator[Harness]:
    """A harness with the graph's extraction running against the Ollama stand-in."""
    h = await start_graph_harness(tmp_path / "data", stub)
    yield h
    await h.close()
