"""httpx logs a line at INFO for every request it sends: each model call. A
server logging at INFO writes none of them; at DEBUG they are there, as DEBUG
lines. The server's own INFO lines are untouched."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator

import pytest

from nexus_grpc.llm import LLMClient
from nexus_grpc.observability import logs
from tests.ollama_stub import OllamaStub

MODEL = "qwen2.5:3b"
MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture
def log_to() -> Iterator[Callable[[str], io.StringIO]]:
    """Configures the server's logging at a level into a buffer; puts the
    test run's own logging back after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level

    def configure(at: str) -> io.StringIO:
        out = io.StringIO()
        logs.configure(at, "text", out)
        return out

    yield configure
    logs.stop()
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
async def test_a_model_call_is_logged_only_at_debug(
    stub: OllamaStub, llm: LLMClient, log_to, level: str
) -> None:
    out = log_to(level)
    stub.enqueue({"entities": []})
    assert await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10) == {
        "entities": []
    }
    logging.getLogger("nexus_grpc.test").info("the server's own line")
    logs.stop()  # writes out what is queued
    text = out.getvalue()
    requests = [line for line in text.splitlines() if "HTTP Request: POST" in line]
    assert " INFO nexus_grpc.test " in text
    if level == "INFO":
        assert requests == [], text
    else:
        assert any("/api/chat" in line for line in requests), text
        assert all(" DEBUG httpx " in line for line in requests), requests
