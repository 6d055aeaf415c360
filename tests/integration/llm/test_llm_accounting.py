"""Every request the LLM clients send is accounted (core/llm_usage.py): the
server's own token counts (Ollama's prompt_eval_count/eval_count, OpenAI's
usage), an estimate where it gives none, how long it took and how it ended,
under the caller's stage, project and tenant: here, that each backend hands
its server's counts (or none) to the account, a stream's included, and that a
failing and a timed-out request are counted.

The account's rules on a scripted backend without HTTP (a cut-off answer and
its retry as two calls, a bad answer with its tokens, a stream the caller
stops reading, a nested stage, a call outside any ledger) are
tests/unit/test_llm_accounting_rules.py's. The messages both send, and the
check of an estimated answer and stream both make, are
tests/llm_accounting_checks.py's."""

from __future__ import annotations

import pytest

from nexus_grpc.core import llm_usage
from nexus_grpc.llm import LLMClient, OllamaClient, OpenAIClient
from tests.llm_accounting_checks import (
    MSGS,
    an_error_and_a_timeout,
    estimated_answer_and_stream,
)
from tests.ollama_stub import OllamaStub, Reply, stub_tokens

MODEL = "qwen2.5:3b"


@pytest.fixture(params=["ollama", "openai"])
async def client(request, stub: OllamaStub):
    made: LLMClient = (
        OllamaClient(stub.url, timeout=5)
        if request.param == "ollama"
        else OpenAIClient(stub.url + "/v1", timeout=5)
    )
    yield made
    await made.close()


def _served(stub: OllamaStub) -> list:
    return [r for r in stub.requests if r.path in ("/api/chat", "/v1/chat/completions")]


async def test_a_call_counts_the_tokens_the_server_says_under_the_callers_ledger(
    stub: OllamaStub, client: LLMClient
):
    stub.enqueue({"entities": ["Ann", "Lisbon"]})
    with llm_usage.ledger(llm_usage.EXTRACTION) as ledger:
        ledger.attribute(7, "acme")
        await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=100)
    [call] = ledger.unwritten()
    [served] = _served(stub)
    answer = '{"entities": ["Ann", "Lisbon"]}'
    assert (call.stage, call.project_id, call.tenant, call.outcome) == (
        "extraction", 7, "acme", "ok")  # fmt: skip
    assert call.prompt_tokens == served.prompt_tokens > 0
    assert call.completion_tokens == len(stub_tokens(answer))
    assert not call.estimated
    assert 0 < call.seconds < 5
    calls, counted, seconds = client.usage.snapshot()
    assert calls == {("extraction", "ok"): 1}
    assert counted == {
        ("extraction", "prompt"): call.prompt_tokens,
        ("extraction", "completion"): call.completion_tokens,
    }
    assert seconds["extraction"] == pytest.approx(call.seconds)


async def test_a_stream_counts_the_servers_tokens_too(stub: OllamaStub, client: LLMClient):
    stub.enqueue(Reply(content="An overview of it", chunks=("An", " overview", " of it")))
    with llm_usage.ledger(llm_usage.OVERVIEW) as ledger:
        text = "".join([d async for d in client.chat_stream(MODEL, MSGS, temperature=0,
                                                            num_predict=50)])  # fmt: skip
    assert text == "An overview of it"
    [call] = ledger.unwritten()
    assert (call.stage, call.outcome, call.estimated) == ("overview", "ok", False)
    assert call.prompt_tokens == _served(stub)[0].prompt_tokens
    # Ollama counts its chunks; OpenAI's usage the answer's tokens.
    assert call.completion_tokens in (3, len(stub_tokens("An overview of it")))


async def test_where_the_server_gives_no_counts_they_are_estimated(
    stub: OllamaStub, client: LLMClient
):
    stub.enqueue(Reply.of({"ok": True}, uncounted=True))
    stub.enqueue(Reply(content="one two", uncounted=True))
    await estimated_answer_and_stream(client, MODEL)


async def test_a_server_error_and_a_timeout_count_calls_without_tokens(
    stub: OllamaStub, client: LLMClient
):
    stub.enqueue(Reply.error_status(503, "busy"), Reply.slow(5, "{}"))
    failed, slow = await an_error_and_a_timeout(client, MODEL)
    assert slow.seconds >= 0.25
