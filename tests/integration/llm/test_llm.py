"""nexus_grpc.llm's clients against the Ollama stand-in: what each call sends,
how an answer is read back, and every way a call can fail (a bad answer, a
closed port, a deadline, an HTTP error).

The pure code they use is tested in the unit tier: the text cleaning in
tests/unit/test_llm_text.py, the prompts and the parsing of their answers in
tests/unit/test_llm_extraction_prompts.py, tests/unit/test_llm_summary_prompts.py
and tests/unit/test_llm_selection_prompts.py; what the client decides about a
request on a scripted backend (a JSON answer parsed as sent, never through the
think stripper, and refused when it is not one object; how each Ollama status
and transport error is classed) in tests/unit/test_llm_requests_rules.py."""

from __future__ import annotations

import asyncio
import socket

import pytest

from nexus_grpc.llm import LLMBadOutput, LLMClient, LLMUnavailable, LLMUnreachable, OllamaClient
from nexus_grpc.llm.extraction_prompts import EXTRACTION_OPTIONS, EXTRACTION_SCHEMA
from nexus_grpc.llm.summary_prompts import (
    PROJECT_OVERVIEW_OPTIONS,
    SESSION_SUMMARY_OPTIONS,
    build_session_summary_messages,
)

try:
    from ollama_stub import OllamaStub, Reply
except ImportError:  # tests/ is a package
    from tests.ollama_stub import OllamaStub, Reply

MODEL = "qwen2.5:3b"
MSGS = [{"role": "user", "content": "hi"}]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_chat_json_sends_schema_and_options(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue({"entities": [], "relationships": []})
    result = await llm.chat_json(MODEL, MSGS, EXTRACTION_SCHEMA, **EXTRACTION_OPTIONS)
    assert result == {"entities": [], "relationships": []}
    (request,) = stub.requests_to("/api/chat")
    assert request["model"] == MODEL
    assert request["format"] == EXTRACTION_SCHEMA
    # num_ctx: the smallest step holding the prompt and 1,500 answer tokens.
    assert request["options"] == {"temperature": 0.1, "num_predict": 1500, "num_ctx": 2048}
    assert request["stream"] is False
    assert not request.truncated
    # The context window was read once, from /api/show, before the call.
    assert [r["model"] for r in stub.requests_to("/api/show")] == [MODEL]


async def test_malformed_body_is_bad_output(stub: OllamaStub, llm: LLMClient) -> None:
    stub.malformed()
    with pytest.raises(LLMBadOutput, match="malformed response body"):
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    with pytest.raises(LLMBadOutput):
        async for _ in llm.chat_stream(MODEL, MSGS, temperature=0, num_predict=10):
            pass


async def test_closed_port_is_unavailable() -> None:
    client = OllamaClient(f"http://127.0.0.1:{_closed_port()}", timeout=2)
    try:
        with pytest.raises(LLMUnreachable, match="cannot reach Ollama"):
            await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
        with pytest.raises(LLMUnreachable):
            await client.list_models()
        with pytest.raises(LLMUnreachable):
            async for _ in client.chat_stream(MODEL, MSGS, temperature=0, num_predict=10):
                pass
    finally:
        await client.close()


async def test_per_call_timeout(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue(Reply.slow(10, "{}"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(LLMUnavailable, match="did not answer within 0.2s"):
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10, timeout=0.2)
    assert loop.time() - started < 3
    with pytest.raises(LLMUnavailable, match="deadline already expired"):
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10, timeout=0)


async def test_stream_deadline_mid_stream(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue(Reply(content="a b c", chunks=("a", "b", "c"), chunk_delay=5))
    got: list[str] = []
    with pytest.raises(LLMUnavailable):
        async for delta in llm.chat_stream(MODEL, MSGS, temperature=0, num_predict=9, timeout=0.5):
            got.append(delta)
    assert got == ["a"]


async def test_http_errors_map(stub: OllamaStub, llm: LLMClient) -> None:
    stub.fail_with(503, "server busy")
    with pytest.raises(LLMUnavailable, match="HTTP 503") as busy:
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    assert not isinstance(busy.value, LLMUnreachable)  # a failing answer, not an outage
    stub.clear_faults()
    with pytest.raises(LLMUnreachable, match="ollama pull llama9"):
        await llm.chat_json("llama9", MSGS, {}, temperature=0, num_predict=10)
    stub.enqueue(Reply.error_status(400, "invalid format"))
    with pytest.raises(LLMBadOutput, match="rejected the request"):
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    stub.enqueue(Reply(content="half", stream_error="runner crashed"))
    with pytest.raises(LLMUnavailable, match="runner crashed"):
        async for _ in llm.chat_stream(MODEL, MSGS, temperature=0, num_predict=10):
            pass


async def test_stream_yields_deltas(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue(Reply(content="Hello there world", chunks=("Hello", " there", " world")))
    deltas = [d async for d in llm.chat_stream(MODEL, MSGS, **PROJECT_OVERVIEW_OPTIONS, timeout=5)]
    assert deltas == ["Hello", " there", " world"]
    request = stub.requests_to("/api/chat")[0]
    assert request["stream"] is True and "format" not in request
    assert request["options"] == {"temperature": 0.2, "num_predict": 1200, "num_ctx": 2048}


async def test_stream_closed_early_cancels_producer(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue(Reply(content="a b", chunks=("a", "b"), chunk_delay=30))
    stream = llm.chat_stream(MODEL, MSGS, temperature=0, num_predict=9)
    assert await anext(stream) == "a"
    await asyncio.wait_for(stream.aclose(), 2)  # must not wait for the slow chunk


async def test_list_models_and_recovery(stub: OllamaStub, llm: LLMClient) -> None:
    assert MODEL in await llm.list_models()
    stub.stop()
    with pytest.raises(LLMUnavailable):
        await llm.list_models()
    stub.start()
    assert MODEL in await llm.list_models()


async def test_chat_text_for_summaries(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue("<think>hmm</think>  The user set up Postgres.  ")
    msgs = build_session_summary_messages([("q", "a")], None)
    text = await llm.chat_text(MODEL, msgs, **SESSION_SUMMARY_OPTIONS)
    assert text == "The user set up Postgres."
    (request,) = stub.requests_to("/api/chat")
    assert request["options"] == {"temperature": 0.2, "num_predict": 500, "num_ctx": 2048}
