"""Context windows, token budgets and cut-off answers, against the stand-in
that behaves as a real Ollama does: a prompt over ``num_ctx`` loses its front,
an answer over ``num_predict`` is cut with ``done_reason: "length"``, and a
schema in ``format`` is not a promise.  Each failure mode is shown happening
first (the positive case), then handled.

The estimate's upper bound is checked here, beside the stand-in's tokenizer it
is checked against; the arithmetic of splitting a text to a budget and of the
window a request asks for is tests/unit/test_llm_tokens.py's. What the client
decides from the context it read, on a scripted backend without HTTP (a prompt
that does not fit refused before it is sent, a cut answer retried once with
twice the room and then refused with the reason, a retry too slow for the
deadline, cut text never returned) is tests/unit/test_llm_requests_rules.py's;
here each backend's positive case shows the stand-in's cut and window read.
The OpenAI-compatible client's own reading of /v1/models and llama-server's
/props, its request bodies, events and error statuses are
tests/unit/test_llm_requests_openai.py's, on httpx's in-process transport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nexus_grpc.llm import (
    LLMBadOutput,
    LLMCutOff,
    LLMUnreachable,
    OllamaClient,
    OpenAIClient,
    tokens,
)
from nexus_grpc.llm.extraction_prompts import EXTRACTION_SCHEMA, parse_extraction
from tests.ollama_stub import OllamaStub, Reply, stub_tokens

MODEL = "qwen2.5:3b"
SYSTEM = "SYSTEM-RULES: answer in JSON."
MSGS = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
ASSETS = Path(__file__).resolve().parents[3] / "nexus_grpc" / "embedding" / "assets"


@pytest.fixture
async def openai(stub: OllamaStub) -> AsyncIterator[OpenAIClient]:
    client = OpenAIClient(stub.url + "/v1", timeout=5)
    yield client
    await client.close()


# -- the estimate --------------------------------------------------------------


SAMPLES = [
    "I moved the ingest service from Postgres 15 to Qdrant 1.12 on 2024-03-07.",
    "réunion à Zürich: naïve café ☕ — 東京の会議 😀 ok",
    "def f(x):\n    return {'a': [1, 2, 3]}  # 0xDEADBEEF\n\n\t",
    "x" * 500 + " " + "9" * 300,
]


@pytest.mark.parametrize("text", SAMPLES)
def test_estimate_is_an_upper_bound_for_real_tokenizers(text: str) -> None:
    from tokenizers import Tokenizer

    # The embedder's shipped tokenizer (WordPiece, lower-cased) and the
    # stand-in's: neither may ever count more tokens than the estimate.
    wordpiece = Tokenizer.from_file(str(ASSETS / "tokenizer.json"))
    wordpiece.no_padding()
    wordpiece.no_truncation()
    counted = len(wordpiece.encode(text, add_special_tokens=False).ids)
    assert 0 < counted <= tokens.estimate_tokens(text)
    assert len(stub_tokens(text)) <= tokens.estimate_tokens(text)


# -- num_ctx: the front of a prompt ------------------------------------------------


async def test_stand_in_cuts_the_front_without_num_ctx(stub: OllamaStub) -> None:
    """What a real Ollama does with a prompt over its default context, shown
    with the plain ollama client: the system prompt is what is lost."""
    import ollama

    client = ollama.AsyncClient(host=stub.url)
    long_user = "fact " * 5000  # ~10,000 stand-in tokens, past the default 4,096
    await client.chat(
        model=MODEL,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": long_user}],
        stream=False,
    )
    (request,) = stub.requests_to("/api/chat")
    assert request.truncated
    assert request.seen_text is not None and SYSTEM not in request.seen_text


async def test_num_ctx_fits_a_long_prompt_whole(stub: OllamaStub, llm: OllamaClient) -> None:
    long_user = "fact " * 5000  # 25,000 bytes: fits qwen2.5's 32k
    stub.enqueue({"ok": True})
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": long_user}]
    assert await llm.chat_json(MODEL, msgs, {}, temperature=0, num_predict=500) == {"ok": True}
    (request,) = stub.requests_to("/api/chat")
    assert request["options"]["num_ctx"] == 32768
    assert not request.truncated
    assert request.seen_text is not None and request.seen_text.startswith(SYSTEM)


async def test_context_is_read_per_model(stub: OllamaStub, llm: OllamaClient) -> None:
    stub.context_lengths = {"qwen2.5:0.5b": 8192}
    assert await llm.context_length(MODEL) == 32768
    assert await llm.context_length("qwen2.5:0.5b") == 8192
    assert await llm.context_length(MODEL) == 32768
    assert [r["model"] for r in stub.requests_to("/api/show")] == [MODEL, "qwen2.5:0.5b"]
    budget = await llm.input_budget("qwen2.5:0.5b", MSGS, 1000)
    assert budget == 8192 - 1000 - tokens.estimate_messages(MSGS)


async def test_unknown_model_context_is_unreachable(stub: OllamaStub, llm: OllamaClient) -> None:
    with pytest.raises(LLMUnreachable, match="ollama pull llama9"):
        await llm.context_length("llama9")


# -- num_predict: cut-off answers ---------------------------------------------------


ANSWER = json.dumps(
    {
        "entities": [{"name": f"e{i}", "type": "concept", "notes": None} for i in range(40)],
        "relationships": [],
    }
)


async def test_cut_answer_is_retried_once_with_more_room(
    stub: OllamaStub, llm: OllamaClient
) -> None:
    room = len(stub_tokens(ANSWER))
    stub.default = Reply(content=ANSWER)
    answer = await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=room // 2 + 1)
    assert len(answer["entities"]) == 40
    first, second = stub.requests_to("/api/chat")
    assert first["options"]["num_predict"] == room // 2 + 1
    assert second["options"]["num_predict"] == 2 * (room // 2 + 1)


async def test_cut_stream_raises_after_the_deltas(stub: OllamaStub, llm: OllamaClient) -> None:
    stub.default = Reply(content="one two three four five six")
    got: list[str] = []
    with pytest.raises(LLMCutOff):
        async for delta in llm.chat_stream(MODEL, MSGS, temperature=0, num_predict=6):
            got.append(delta)
    assert "".join(got) == "one two three"  # 5 stand-in tokens, spaces included
    got = [d async for d in llm.chat_stream(MODEL, MSGS, temperature=0, num_predict=50)]
    assert "".join(got) == "one two three four five six"


# -- format: a schema is not a promise ----------------------------------------------


async def test_answer_ignoring_the_schema_is_bad_output(
    stub: OllamaStub, llm: OllamaClient
) -> None:
    stub.enqueue({"people": ["Alice"]})
    answer = await llm.chat_json(MODEL, MSGS, EXTRACTION_SCHEMA, temperature=0, num_predict=100)
    assert stub.requests_to("/api/chat")[0]["format"] == EXTRACTION_SCHEMA
    with pytest.raises(LLMBadOutput, match="'entities' must be a list"):
        parse_extraction(answer)


# -- the OpenAI-compatible backend (Ollama's own /v1 endpoints) ------------------------


async def test_openai_json_call(stub: OllamaStub, openai: OpenAIClient) -> None:
    stub.enqueue({"entities": [], "relationships": []})
    answer = await openai.chat_json(
        MODEL, MSGS, EXTRACTION_SCHEMA, temperature=0.1, num_predict=300
    )
    assert answer == {"entities": [], "relationships": []}
    (request,) = stub.requests_to("/v1/chat/completions")
    assert request["max_tokens"] == 300 and request["temperature"] == 0.1
    assert request["stream"] is False
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": EXTRACTION_SCHEMA, "strict": True},
    }
    # The server did not say how long the context is: Ollama's default is assumed.
    assert await openai.context_length(MODEL) == tokens.DEFAULT_CONTEXT_LENGTH


async def test_openai_cut_off_and_stream(stub: OllamaStub, openai: OpenAIClient) -> None:
    stub.default = Reply(content=ANSWER)
    with pytest.raises(LLMCutOff, match="after a retry"):
        await openai.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    assert [r["max_tokens"] for r in stub.requests_to("/v1/chat/completions")] == [10, 20]
    stub.default = Reply(content="one two three four five six")
    got = [d async for d in openai.chat_stream(MODEL, MSGS, temperature=0, num_predict=50)]
    assert "".join(got) == "one two three four five six"
    got = []
    with pytest.raises(LLMCutOff):
        async for delta in openai.chat_stream(MODEL, MSGS, temperature=0, num_predict=6):
            got.append(delta)
    assert "".join(got) == "one two three"


async def test_openai_models_and_errors(stub: OllamaStub, openai: OpenAIClient) -> None:
    assert MODEL in await openai.list_models()
    assert await openai.missing_models([MODEL, "llama9"]) == ["llama9"]
    with pytest.raises(LLMUnreachable, match="not found"):
        await openai.chat_text("llama9", MSGS, temperature=0, num_predict=10)
    stub.fail_with(503, "busy")
    with pytest.raises(Exception, match=r"failed \(HTTP 503\): busy"):
        await openai.chat_text(MODEL, MSGS, temperature=0, num_predict=10)
    stub.clear_faults()
    stub.stop()
    with pytest.raises(LLMUnreachable, match="cannot reach"):
        await openai.list_models()
