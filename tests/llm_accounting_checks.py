"""The LLM account's checks both of its runs make: on a scripted backend
(tests/unit/test_llm_accounting_rules.py) and on each real backend against the
Ollama stand-in (tests/integration/llm/test_llm_accounting.py). Not a test
module."""

from __future__ import annotations

import pytest

from nexus_grpc.core import llm_usage
from nexus_grpc.core.llm_usage import LLMCall
from nexus_grpc.llm import LLMError
from nexus_grpc.llm import tokens as llm_tokens

MSGS = [{"role": "user", "content": "What did Ann say about the Lisbon trip?"}]


async def estimated_answer_and_stream(client, model: str) -> tuple[LLMCall, LLMCall]:
    """``client``'s server answers ``{"ok": true}`` and then streams "one two",
    counting neither: both calls are estimated, from the messages and the text
    (the stream's prompt is left to the caller to check). The two calls."""
    with llm_usage.ledger(llm_usage.SELECTION) as ledger:
        await client.chat_json(model, MSGS, {}, temperature=0, num_predict=100)
        _ = [d async for d in client.chat_stream(model, MSGS, temperature=0, num_predict=50)]
    answered, streamed = ledger.unwritten()
    assert answered.estimated and streamed.estimated
    assert answered.prompt_tokens == llm_tokens.approximate_messages(MSGS)
    assert answered.completion_tokens == llm_tokens.approximate_tokens('{"ok": true}')
    assert streamed.completion_tokens == llm_tokens.approximate_tokens("one two")
    return answered, streamed


async def an_error_and_a_timeout(client, model: str) -> tuple[LLMCall, LLMCall]:
    """``client``'s server fails the first call (unreachable) and is too slow for
    the second (a timeout of 0.3 s): both are counted, with no tokens. The two
    calls."""
    with llm_usage.ledger(llm_usage.FORMATION) as ledger:
        for _ in range(2):
            with pytest.raises(LLMError):
                await client.chat_json(model, MSGS, {}, temperature=0, num_predict=10, timeout=0.3)
    failed, slow = ledger.unwritten()
    assert (failed.outcome, slow.outcome) == ("unreachable", "timeout")
    assert failed.tokens == slow.tokens == 0
    return failed, slow
