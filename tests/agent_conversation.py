"""The agent's conversation of the chat adapters' tests, as LangChain's
messages: a greeting with no question, a system message, a tool-calling turn
(user, assistant with tool calls, tool result, answer), a message with an
image, a streamed answer with reasoning and a closing thanks; ``WEATHER_TURN``
is the tool-calling turn's answer as one exchange keeps it, and ``EXPECTED``
the first exchange paired from it. Not a test module: the pairing without a
server (tests/unit/test_frameworks_chat_turns.py) and the adapters through a
real server (tests/e2e/frameworks/test_chat_turns.py) use the same
conversation and the same expected exchange."""

from __future__ import annotations

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

WEATHER_TURN = (
    '[tool call] get_weather({"city": "Paris"})\n\n'
    "[tool result] get_weather: 18°C and sunny in Paris\n\n"
    "It is 18°C and sunny in Paris."
)


def langchain_conversation() -> list:
    return [
        AIMessage("Hello! How can I help?"),
        SystemMessage("Answer briefly."),
        HumanMessage("What's the weather in Paris?"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]),
        ToolMessage("18°C and sunny in Paris", tool_call_id="c1"),
        AIMessage("It is 18°C and sunny in Paris."),
        HumanMessage(
            [
                {"type": "text", "text": "And this one?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ]
        ),
        # A streamed answer, accumulated: a chunk.
        AIMessageChunk(
            [{"type": "reasoning", "reasoning": "a bridge"}, {"type": "text", "text": "Oslo."}]
        ),
        HumanMessage("Thanks!"),
    ]


EXPECTED = [
    (
        "What's the weather in Paris?",
        WEATHER_TURN,
        {
            "messages_before": [
                {"role": "assistant", "text": "Hello! How can I help?"},
                {"role": "system", "text": "Answer briefly."},
            ]
        },
    ),
]
