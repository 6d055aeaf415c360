"""The account of every request an LLM client sends (llm/client.py into
core/llm_usage.py), on a client whose backend is a script (no HTTP;
``ScriptedClient`` of tests/unit/scripted_models.py): the server's own token
counts, an estimate where it gives none, how each request ended, under the
caller's stage, project and tenant; and the ledger's own rules (a nested
stage, calls written, a call outside any ledger).

That each real backend (Ollama's prompt_eval_count/eval_count, OpenAI's usage)
hands its server's counts to this account, and leaves an estimate where the
server gives none, is tests/integration/llm/test_llm_accounting.py's, against
the Ollama stand-in. The messages both send, and the check of an estimated
answer and stream both make, are tests/llm_accounting_checks.py's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nexus_grpc.core import llm_usage
from nexus_grpc.llm import LLMBadOutput, LLMCutOff, LLMUnavailable
from nexus_grpc.llm import tokens as llm_tokens
from nexus_grpc.llm.client import StreamDelta
from tests.llm_accounting_checks import (
    MSGS,
    an_error_and_a_timeout,
    estimated_answer_and_stream,
)
from tests.unit.scripted_models import MODEL, ScriptedClient, answer


async def test_a_call_counts_the_tokens_the_server_says_under_the_callers_ledger() -> None:
    client = ScriptedClient(answer('{"entities": ["Ann", "Lisbon"]}', 12, 9))
    with llm_usage.ledger(llm_usage.EXTRACTION) as ledger:
        ledger.attribute(7, "acme")
        got = await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=100)
    assert got == {"entities": ["Ann", "Lisbon"]}
    [call] = ledger.unwritten()
    assert (call.stage, call.project_id, call.tenant, call.outcome) == (
        "extraction", 7, "acme", "ok")  # fmt: skip
    assert (call.prompt_tokens, call.completion_tokens) == (12, 9)
    assert not call.estimated
    assert 0 <= call.seconds < 5
    calls, counted, seconds = client.usage.snapshot()
    assert calls == {("extraction", "ok"): 1}
    assert counted == {("extraction", "prompt"): 12, ("extraction", "completion"): 9}
    assert seconds["extraction"] == pytest.approx(call.seconds)


async def test_a_stream_counts_the_tokens_its_last_delta_carries() -> None:
    deltas = [StreamDelta("An"), StreamDelta(" overview"), StreamDelta(" of it", "stop", 30, 3)]
    client = ScriptedClient(streams=[deltas])
    with llm_usage.ledger(llm_usage.OVERVIEW) as ledger:
        text = "".join(
            [d async for d in client.chat_stream(MODEL, MSGS, temperature=0, num_predict=50)]
        )
    assert text == "An overview of it"
    [call] = ledger.unwritten()
    assert (call.stage, call.outcome, call.estimated) == ("overview", "ok", False)
    assert (call.prompt_tokens, call.completion_tokens) == (30, 3)


async def test_where_the_server_gives_no_counts_they_are_estimated() -> None:
    client = ScriptedClient(
        answer('{"ok": true}', None, None),
        streams=[[StreamDelta("one"), StreamDelta(" two", "stop")]],
    )
    _, streamed = await estimated_answer_and_stream(client, MODEL)
    assert streamed.prompt_tokens == llm_tokens.approximate_messages(MSGS)


async def test_one_missing_count_is_estimated_and_the_other_kept() -> None:
    # Ollama leaves prompt_eval_count out when the whole prompt was in its cache.
    client = ScriptedClient(answer("{}", None, 4))
    with llm_usage.ledger(llm_usage.SELECTION) as ledger:
        await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=100)
    [call] = ledger.unwritten()
    assert call.estimated
    assert (call.prompt_tokens, call.completion_tokens) == (
        llm_tokens.approximate_messages(MSGS), 4)  # fmt: skip


async def test_a_cut_off_answer_and_its_retry_are_two_calls() -> None:
    long = " ".join(["word"] * 40)
    client = ScriptedClient(answer(long, 20, 10, "length"), answer(long, 20, 20, "length"))
    with llm_usage.ledger(llm_usage.SUMMARY) as ledger, pytest.raises(LLMCutOff):
        await client.chat_text(MODEL, MSGS, temperature=0, num_predict=10)
    first, retry = ledger.unwritten()
    assert (first.outcome, retry.outcome) == ("cut_off", "cut_off")
    # Both answers were paid for: the server wrote their tokens.
    assert (first.completion_tokens, retry.completion_tokens) == (10, 20)


async def test_an_answer_that_is_not_json_is_a_bad_answer_with_its_tokens() -> None:
    client = ScriptedClient(answer("sure! here are the entities", 15, 6))
    with llm_usage.ledger(llm_usage.EXTRACTION) as ledger, pytest.raises(LLMBadOutput):
        await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=100)
    [call] = ledger.unwritten()
    assert call.outcome == "bad_answer"
    assert (call.prompt_tokens, call.completion_tokens) == (15, 6)
    assert client.usage.snapshot()[0] == {("extraction", "bad_answer"): 1}


async def test_a_server_error_and_a_timeout_count_calls_without_tokens() -> None:
    client = ScriptedClient(LLMUnavailable("HTTP 503: busy"), TimeoutError())
    failed, slow = await an_error_and_a_timeout(client, MODEL)
    assert not failed.estimated and not slow.estimated


async def test_a_malformed_body_is_a_bad_answer_without_tokens() -> None:
    client = ScriptedClient(LLMBadOutput("sent a malformed response body"))
    with llm_usage.ledger(llm_usage.EXTRACTION) as ledger, pytest.raises(LLMBadOutput):
        await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    [call] = ledger.unwritten()
    assert (call.outcome, call.tokens) == ("bad_answer", 0)


async def test_a_call_refused_before_sending_counts_nothing() -> None:
    client = ScriptedClient(answer("{}"))
    with llm_usage.ledger(llm_usage.EXTRACTION) as ledger:
        with pytest.raises(LLMUnavailable, match="deadline already expired"):
            await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10, timeout=0)
    assert ledger.unwritten() == [] and client.sent == []


async def test_a_stream_the_caller_stops_reading_is_cancelled() -> None:
    never = asyncio.Event()
    client = ScriptedClient(streams=[[StreamDelta("a"), never, StreamDelta(" b", "stop")]])
    with llm_usage.ledger(llm_usage.OVERVIEW) as ledger:
        stream = client.chat_stream(MODEL, MSGS, temperature=0, num_predict=9)
        assert await anext(stream) == "a"
        await asyncio.wait_for(stream.aclose(), 2)
    [call] = ledger.unwritten()
    assert call.outcome == "cancelled"
    assert call.estimated and call.completion_tokens == llm_tokens.approximate_tokens("a")


async def test_a_stream_that_fails_counts_its_outcome_without_tokens() -> None:
    class Broken(ScriptedClient):
        async def _stream(self, *args: Any) -> AsyncIterator[StreamDelta]:  # type: ignore[override]
            yield StreamDelta("half")
            raise ConnectionError("runner crashed")

    client = Broken()
    with llm_usage.ledger(llm_usage.OVERVIEW) as ledger:
        got: list[str] = []
        with pytest.raises(LLMUnavailable, match="runner crashed"):
            async for delta in client.chat_stream(MODEL, MSGS, temperature=0, num_predict=9):
                got.append(delta)
    assert got == ["half"]
    [call] = ledger.unwritten()
    assert (call.outcome, call.tokens) == ("unreachable", 0)


async def test_a_nested_stage_counts_apart_in_the_same_ledger() -> None:
    client = ScriptedClient(answer("{}"), answer("{}"), answer("{}"))
    with llm_usage.ledger(llm_usage.EXTRACTION, 3, "acme") as ledger:
        await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
        with llm_usage.stage(llm_usage.RESOLUTION):
            await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
        await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    assert [(c.stage, c.tenant) for c in ledger.unwritten()] == [
        ("extraction", "acme"), ("resolution", "acme"), ("extraction", "acme")]  # fmt: skip
    written = ledger.unwritten()[:1]
    ledger.written(written)
    assert [c.stage for c in ledger.unwritten()] == ["resolution", "extraction"]


async def test_a_call_outside_any_ledger_is_counted_as_unattributed() -> None:
    client = ScriptedClient(answer("{}"))
    await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    calls, _, _ = client.usage.snapshot()
    assert calls == {("unattributed", "ok"): 1}
    assert llm_usage.current() is None
