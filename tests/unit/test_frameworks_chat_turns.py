"""The chat adapters' conversion of a framework's messages into exchanges
(integrations/langchain.py reads LangChain's messages, integrations/exchanges.py pairs
them), without a server: a tool-calling turn, system messages, a greeting with no
question, a message with an image, questions and answers split across calls, a message
with no chat role.

(The adapters storing what they pair as episodes of a real server, and reading them
back, LlamaIndex's memory block beside LangChain's history:
tests/e2e/frameworks/test_chat_turns.py and test_langchain.py. LlamaIndex is not
imported here: it alone takes about two seconds to import, as long as this tier runs.)"""

from __future__ import annotations

import pytest
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
)

from nexus_grpc.integrations import langchain
from nexus_grpc.integrations.exchanges import Conversation, Exchange, Said
from tests.agent_conversation import EXPECTED, langchain_conversation


def exchanges(said: list[Said]) -> tuple[list[tuple[str, str, dict]], list[Said]]:
    done, pending = Conversation().plan(said)
    return [(e.user, e.assistant, e.metadata()) for e in done], pending


def test_a_tool_calling_turn_is_one_exchange_with_what_came_before_it_kept():
    lc, pending = exchanges([langchain._said(n, m) for n, m in enumerate(langchain_conversation())])
    assert lc[0] == EXPECTED[0]
    # An image is kept as its kind; reasoning is not kept.
    assert lc[1] == ("And this one? [image_url]", "Oslo.", {})
    assert len(lc) == 2
    # "Thanks!" waits for its answer.
    assert [s.text for s in pending] == ["Thanks!"]


def test_messages_pair_into_exchanges_across_calls():
    conversation = Conversation()

    def add(*messages) -> list[tuple[str, str]]:
        done, pending = conversation.plan([langchain._said(n, m) for n, m in enumerate(messages)])
        conversation.commit(pending)
        return [(e.user, e.assistant) for e in done]

    # The question waits for its answer.
    assert add(HumanMessage("Hi, I'm Alice.")) == []
    assert [s.text for s in conversation.pending] == ["Hi, I'm Alice."]
    assert add(AIMessage("Hello Alice!")) == [("Hi, I'm Alice.", "Hello Alice!")]
    assert add(HumanMessage("Two things:"), HumanMessage("tea or coffee?"), AIMessage("Tea."),
               AIMessage("Always tea.")) == [
        ("Two things:\n\ntea or coffee?", "Tea.\n\nAlways tea."),
    ]  # fmt: skip
    assert conversation.pending == []
    # A question left unanswered is written alone on flush.
    assert add(HumanMessage("Are you there?")) == []
    waiting, rest = conversation.unanswered()
    assert (waiting, rest) == (Exchange("Are you there?", ""), [])
    assert Conversation().unanswered() == (None, [])  # nothing asked: nothing to flush


def test_a_message_with_no_chat_role_is_refused_with_its_index():
    with pytest.raises(ValueError) as refused:
        langchain._said(1, ChatMessage("Hmm.", role="critic"))
    assert refused.value.index == 1  # type: ignore[attr-defined]
    assert refused.value.why.startswith(  # type: ignore[attr-defined]
        "is a ChatMessage with role 'critic', which is none of a chat's roles ("
    )
