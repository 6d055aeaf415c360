"""HTTP clients of ours (the LLM backends, the reranker) made as the server
makes them, their ``httpx.AsyncClient`` over httpx's in-process transport to a
handler of the test's: no socket, no server. Not a test module: the Ollama,
OpenAI-compatible and rerank clients' unit tests
(tests/unit/test_llm_requests_ollama.py, test_llm_requests_openai.py,
test_rerank_client_rules_requests.py) all connect this way."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

import httpx
import pytest


class Closing(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=Closing)


@contextlib.asynccontextmanager
async def in_process_clients(
    handler: Callable[[httpx.Request], httpx.Response],
    monkeypatch: pytest.MonkeyPatch,
    factory: Callable[..., C],
) -> AsyncIterator[Callable[..., C]]:
    """A ``make`` that builds a client with ``factory``, every httpx client it
    opens sending to ``handler`` in-process; each client made is closed on exit."""
    made: list[C] = []
    real = httpx.AsyncClient

    def in_process(**options: Any) -> httpx.AsyncClient:
        return real(transport=httpx.MockTransport(handler), **options)

    def make(*args: Any, **options: Any) -> C:
        with monkeypatch.context() as patch:
            patch.setattr(httpx, "AsyncClient", in_process)
            client = factory(*args, **options)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()
