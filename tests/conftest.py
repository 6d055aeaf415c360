"""Fixtures shared by every test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ollama_stub import OllamaStub, Reply
from tests.support import Harness, start_harness


@pytest.fixture
async def harness(tmp_path) -> Harness:
    h = await start_harness(tmp_path / "data")
    yield h
    await h.close()


@pytest.fixture
def stub(request: pytest.FixtureRequest) -> Iterator[OllamaStub]:
    """The protocol-faithful Ollama stand-in, on an ephemeral port.

    A module whose tests need an answer to chats they did not script sets
    ``STUB_DEFAULT_REPLY``: the JSON object the stub then answers with.
    """
    default = getattr(request.module, "STUB_DEFAULT_REPLY", None)
    with OllamaStub(default=None if default is None else Reply.of(default)) as s:
        yield s
