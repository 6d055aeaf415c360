"""What an LLM client decides about each request (llm/client.py), on a client
whose backend is a script (no HTTP): the context window read once per model,
the room an answer gets and the window a request asks for, a prompt that does
not fit refused before it is sent, a cut-off answer retried once with more
room and then refused, a deadline already spent, an answer that must be one
JSON object; and how Ollama's errors are worded and classed.

What the real Ollama and OpenAI-compatible backends send and read, against
the Ollama stand-in, is tests/integration/llm/test_llm.py's and
tests/integration/llm/test_llm_budget.py's."""

from __future__ import annotations

import json
import re

import httpx
import ollama
import pytest

from nexus_grpc.llm import (
    LLMBadOutput,
    LLMCutOff,
    LLMInputTooLong,
    LLMTimedOut,
    LLMUnavailable,
    LLMUnreachable,
    OllamaClient,
    parse_json_object,
    tokens,
)
from nexus_grpc.llm.client import StreamDelta
from tests.unit.scripted_models import MODEL, ScriptedClient, answer

SYSTEM = "SYSTEM-RULES: answer in JSON."
MSGS = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]


# -- the context window and the room of an answer ------------------------------------


async def test_the_context_is_read_once_per_model() -> None:
    client = ScriptedClient(contexts={"qwen2.5:0.5b": 8192})
    assert await client.context_length(MODEL) == 32768
    assert await client.context_length("qwen2.5:0.5b") == 8192
    assert await client.context_length(MODEL) == 32768
    assert client.context_reads == [MODEL, "qwen2.5:0.5b"]
    budget = await client.input_budget("qwen2.5:0.5b", MSGS, 1000)
    assert budget == 8192 - 1000 - tokens.estimate_messages(MSGS)


async def test_a_server_that_does_not_say_gets_the_default_context_once() -> None:
    client = ScriptedClient(context=None)
    assert await client.context_length(MODEL) == tokens.DEFAULT_CONTEXT_LENGTH
    assert await client.context_length(MODEL) == tokens.DEFAULT_CONTEXT_LENGTH
    assert client.context_reads == [MODEL]


async def test_a_context_set_for_the_client_is_never_asked() -> None:
    client = ScriptedClient(context_length=2048)
    assert await client.context_length(MODEL) == 2048
    with pytest.raises(LLMInputTooLong):
        await client.chat_text(
            MODEL, [{"role": "user", "content": "x" * 3000}], temperature=0, num_predict=10
        )
    assert client.context_reads == [] and client.sent == []


async def test_a_request_asks_for_the_smallest_window_holding_prompt_and_answer() -> None:
    client = ScriptedClient(answer("{}"), answer("{}"))
    schema = {"type": "object"}
    await client.chat_json(MODEL, MSGS, schema, temperature=0.1, num_predict=1500)
    long = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "fact " * 5000}]
    await client.chat_json(MODEL, long, schema, temperature=0, num_predict=500)
    # num_ctx: the smallest step holding the prompt and the answer's room.
    assert client.sent == [(MODEL, 1500, 2048, schema), (MODEL, 500, 32768, schema)]


async def test_a_prompt_over_the_model_context_is_refused_not_cut() -> None:
    client = ScriptedClient(answer('{"ok": true}'), contexts={"qwen2.5:0.5b": 2048})
    msgs = [{"role": "user", "content": "x" * 1000}]
    assert await client.chat_json("qwen2.5:0.5b", msgs, {}, temperature=0, num_predict=500)
    too_long = [{"role": "user", "content": "x" * 3000}]
    with pytest.raises(LLMInputTooLong, match="do not fit qwen2.5:0.5b's context of 2048"):
        await client.chat_json("qwen2.5:0.5b", too_long, {}, temperature=0, num_predict=500)
    assert len(client.sent) == 1  # nothing was sent to be cut


# -- cut-off answers ------------------------------------------------------------------


async def test_a_cut_answer_is_retried_once_with_twice_the_room() -> None:
    client = ScriptedClient(answer('{"entities"', done="length"), answer('{"entities": []}'))
    got = await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=11)
    assert got == {"entities": []}
    assert [sent[1] for sent in client.sent] == [11, 22]


async def test_an_answer_cut_twice_fails_with_the_reason() -> None:
    cut = answer('{"entities"', done="length")
    client = ScriptedClient(cut, cut)
    with pytest.raises(LLMCutOff, match="cut off at its limit of 20 tokens after a retry"):
        await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    assert [sent[1] for sent in client.sent] == [10, 20]


async def test_the_retry_gets_no_more_room_than_the_context_leaves() -> None:
    prompt = tokens.estimate_messages(MSGS)
    cut = answer("half an answer", done="length")
    client = ScriptedClient(cut, cut, context=2048)
    with pytest.raises(LLMCutOff, match="after a retry"):
        await client.chat_text(MODEL, MSGS, temperature=0, num_predict=1500)
    assert [sent[1:3] for sent in client.sent] == [(1500, 2048), (2048 - prompt, 2048)]


async def test_no_retry_when_the_context_leaves_no_more_room() -> None:
    prompt = tokens.estimate_messages(MSGS)
    client = ScriptedClient(answer("half an answer", done="length"), context=2048)
    with pytest.raises(LLMCutOff) as cut:
        await client.chat_text(MODEL, MSGS, temperature=0, num_predict=2048 - prompt)
    assert f"cut off at its limit of {2048 - prompt} tokens (done_reason=length)" in str(cut.value)
    assert "retry" not in str(cut.value)
    assert len(client.sent) == 1


async def test_a_retry_too_slow_for_the_deadline_still_fails_as_cut_off() -> None:
    client = ScriptedClient(answer('{"entities"', done="length"), TimeoutError())
    with pytest.raises(LLMCutOff, match="retry with 20 did not finish within the 1s deadline"):
        await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10, timeout=1)
    assert [sent[1] for sent in client.sent] == [10, 20]


async def test_cut_text_is_never_returned_and_text_is_stripped() -> None:
    whole = "<think>hmm</think>  The user set up Grafana dashboards and Prometheus alerts.  "
    cut = answer("The user set up", done="length")
    client = ScriptedClient(answer(whole), cut, cut)
    # The positive case: with room, the whole text, without the model's tokens.
    text = await client.chat_text(MODEL, MSGS, temperature=0, num_predict=100)
    assert text == "The user set up Grafana dashboards and Prometheus alerts."
    with pytest.raises(LLMCutOff):
        await client.chat_text(MODEL, MSGS, temperature=0, num_predict=4)


async def test_a_cut_stream_raises_after_its_deltas() -> None:
    cut = [StreamDelta("one"), StreamDelta(" two"), StreamDelta(" three", "length")]
    client = ScriptedClient(streams=[cut])
    got: list[str] = []
    with pytest.raises(LLMCutOff, match="cut off at its limit of 6 tokens"):
        async for delta in client.chat_stream(MODEL, MSGS, temperature=0, num_predict=6):
            got.append(delta)
    assert "".join(got) == "one two three"


# -- deadlines ----------------------------------------------------------------------


async def test_a_spent_deadline_sends_nothing() -> None:
    client = ScriptedClient(answer("{}"))
    with pytest.raises(LLMUnavailable, match="deadline already expired"):
        await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10, timeout=0)
    with pytest.raises(LLMUnavailable, match="deadline already expired"):
        await client.list_models(timeout=-1)
    assert client.sent == []


async def test_a_timed_out_request_names_its_deadline() -> None:
    client = ScriptedClient(TimeoutError())
    with pytest.raises(LLMTimedOut, match=r"Scripted \(qwen2.5:3b\) .* did not answer within 0.2s"):
        await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10, timeout=0.2)


# -- a JSON answer ----------------------------------------------------------------------


def test_a_json_answer_is_parsed_as_sent() -> None:
    note = {"name": "Qwen3", "notes": "emits <think>...</think> blocks before answering"}
    # Never through the think stripper: the note is kept whole.
    assert parse_json_object(json.dumps({"entities": [note]})) == {"entities": [note]}
    # A stray fence costs nothing to tolerate.
    assert parse_json_object('```json\n{"a": 1}\n```') == {"a": 1}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("not json at all", "did not answer JSON"),
        ("[1, 2]", "answered JSON list, expected an object"),
        ("", "did not answer JSON"),
        ("<think>never closed", "did not answer JSON"),
        # Text around JSON is not JSON: a schema-constrained answer never has any.
        ('<think>let me see</think>\n{"a": 1}', "did not answer JSON"),
    ],
)
def test_an_answer_that_is_not_one_json_object_is_bad_output(content: str, words: str) -> None:
    with pytest.raises(LLMBadOutput, match=words):
        parse_json_object(content, model=MODEL)


async def test_chat_json_returns_the_parsed_object_and_sends_the_schema() -> None:
    schema = {"type": "object", "required": ["entities"]}
    client = ScriptedClient(answer('{"entities": [], "relationships": []}'))
    got = await client.chat_json(MODEL, MSGS, schema, temperature=0, num_predict=100)
    assert got == {"entities": [], "relationships": []}
    assert client.sent[0][3] == schema


# -- which models the server has ------------------------------------------------------


async def test_missing_models_are_named_once_each() -> None:
    client = ScriptedClient(models=[MODEL, "nomic-embed-text:latest"])
    assert await client.missing_models([MODEL, "llama9", "llama9"]) == ["llama9"]


async def test_ollama_reads_a_bare_model_name_as_its_latest_tag() -> None:
    assert OllamaClient._has_model("qwen2.5", ["qwen2.5:latest"])
    assert OllamaClient._has_model("qwen2.5:3b", ["qwen2.5:3b"])
    assert not OllamaClient._has_model("qwen2.5", ["qwen2.5:3b"])
    assert not ScriptedClient._has_model("qwen2.5", ["qwen2.5:latest"])


# -- Ollama's errors ------------------------------------------------------------------


@pytest.fixture
async def ollama_client():
    # Made, never connected: only its error mapping is called.
    client = OllamaClient("http://user:secret@ollama.local:11434", timeout=5)
    yield client
    await client.close()


@pytest.mark.parametrize(
    ("status", "kind", "words"),
    [
        (404, LLMUnreachable, "not available on Ollama .* pull it with `ollama pull llama9`"),
        (503, LLMUnavailable, r"failed \(HTTP 503\): server busy"),
        (429, LLMUnavailable, r"failed \(HTTP 429\)"),
        # An error line in the middle of a 200 stream: the runner crashed.
        (-1, LLMUnavailable, r"failed \(HTTP -1\): server busy"),
        # Ollama refused our request: not an outage, never retried forever.
        (400, LLMBadOutput, r"rejected the request \(HTTP 400\): server busy"),
    ],
)
async def test_ollama_http_errors_are_classed_by_status(
    ollama_client: OllamaClient, status: int, kind: type, words: str
) -> None:
    error = ollama_client._map_error(ollama.ResponseError("server busy", status), "llama9", 5)
    assert type(error) is kind
    assert re.search(words, str(error)), str(error)


async def test_a_failing_answer_is_not_an_outage(ollama_client: OllamaClient) -> None:
    busy = ollama_client._map_error(ollama.ResponseError("busy", 503), MODEL, 5)
    assert not isinstance(busy, LLMUnreachable)


@pytest.mark.parametrize(
    ("exc", "kind", "words"),
    [
        (httpx.ConnectError("refused"), LLMUnreachable, "cannot reach Ollama at"),
        (ConnectionError("refused"), LLMUnreachable, "cannot reach Ollama at"),
        (httpx.ConnectTimeout("slow"), LLMUnreachable, "cannot reach Ollama at"),
        (TimeoutError(), LLMTimedOut, r"did not answer within 0.2s"),
        (httpx.ReadTimeout("slow"), LLMTimedOut, r"did not answer within 0.2s"),
        (httpx.ReadError("reset"), LLMUnavailable, "connection to Ollama at .* failed: reset"),
        (json.JSONDecodeError("bad", "x", 0), LLMBadOutput, "malformed response body"),
        (httpx.DecodingError("gzip"), LLMBadOutput, "malformed response body"),
        (OSError("disk"), LLMUnavailable, "error talking to Ollama"),
        (ValueError("odd"), LLMBadOutput, "unexpected error from Ollama"),
    ],
)
async def test_transport_errors_are_classed_and_the_host_masked(
    ollama_client: OllamaClient, exc: Exception, kind: type, words: str
) -> None:
    error = ollama_client._map_error(exc, MODEL, 0.2)
    assert type(error) is kind
    assert re.search(words, str(error)), str(error)
    assert "secret" not in str(error)
