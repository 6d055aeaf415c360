"""An agent's conversation through both chat adapters: a tool-calling turn (user,
assistant with tool calls, tool result, answer), system messages, a greeting with no
question, a message with an image. LangChain's history and LlamaIndex's memory block
keep them alike, as exchanges that search and extraction read (issue 47.4).

Here through a real server, stored and read back; the pairing of LangChain's messages
into exchanges, without one: tests/unit/test_frameworks_chat_turns.py (the
conversation both store is tests/agent_conversation.py's)."""

from __future__ import annotations

import pytest
from google.protobuf import json_format, struct_pb2
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
)
from langchain_core.tools import tool
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations.langchain import NexusChatMessageHistory
from nexus_grpc.integrations.llamaindex import NexusMemoryBlock
from tests.agent_conversation import EXPECTED, WEATHER_TURN, langchain_conversation
from tests.e2e.frameworks.conftest import indexed, project_named
from tests.graph_support import EMPTY
from tests.support import wait_until

STUB_DEFAULT_REPLY = EMPTY


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"18°C and sunny in {city}"


async def episodes(client: NexusClient, name: str) -> list[tuple[str, str, dict]]:
    """The session's episodes, oldest first: (user, answer, metadata)."""
    [session] = [s for s in (await client.list_sessions()).sessions if s.name == name]
    page = await client.list_episodes(session_id=session.id, page_size=100)
    return [
        (e.user_message, e.ai_response, dict(e.metadata.items())) for e in reversed(page.episodes)
    ]


def plain(metadata: dict) -> dict:
    """An episode's metadata as plain values (Struct values come back as proto lists)."""
    message = struct_pb2.Struct()
    message.update(metadata)
    return json_format.MessageToDict(message)


async def test_a_langchain_agent_loop_stores_its_tool_calling_turn_as_one_exchange(client):
    """The loop a tool-calling agent runs on a history: each message added as it comes;
    the model (LangChain's fake) reads the history, the tool is LangChain's own."""
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}],
                ),
                AIMessage("It is 18°C and sunny in Paris."),
            ]
        )
    )
    history = NexusChatMessageHistory("agent", client=client, project="p", user_id="alice")
    await history.aadd_messages([HumanMessage("What's the weather in Paris?")])
    seen_by_model = []
    while True:
        prompt = await history.aget_messages()
        seen_by_model.append([type(m).__name__ for m in prompt])
        reply = await model.ainvoke(prompt)
        await history.aadd_messages([reply])
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            await history.aadd_messages([await get_weather.ainvoke(call)])
    # While the turn was open, the model read it as added, tool call and result included.
    assert seen_by_model == [["HumanMessage"], ["HumanMessage", "AIMessage", "ToolMessage"]]
    assert await episodes(client, "agent") == [("What's the weather in Paris?", WEATHER_TURN, {})]
    read = await history.aget_messages()
    assert [(type(m), m.content) for m in read] == [
        (HumanMessage, "What's the weather in Paris?"),
        (AIMessage, WEATHER_TURN),
    ]


def llamaindex_conversation() -> list[ChatMessage]:
    return [
        ChatMessage(role="assistant", content="Hello! How can I help?"),
        ChatMessage(role="system", content="Answer briefly."),
        ChatMessage(role="user", content="What's the weather in Paris?"),
        # As an OpenAI-style integration puts its tool calls.
        ChatMessage(
            role="assistant",
            content="",
            additional_kwargs={
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ]
            },
        ),
        ChatMessage(
            role="tool", content="18°C and sunny in Paris", additional_kwargs={"tool_call_id": "c1"}
        ),
        ChatMessage(role="assistant", content="It is 18°C and sunny in Paris."),
        ChatMessage(
            role="user",
            blocks=[
                {"block_type": "text", "text": "And this one?"},
                {"block_type": "image", "url": "https://example.invalid/oslo.png"},
            ],
        ),
        ChatMessage(role="assistant", content="Oslo."),
        ChatMessage(role="user", content="Thanks!"),
    ]


async def test_both_adapters_keep_the_same_conversation_the_same_way(harness, client):
    history = NexusChatMessageHistory("lc", client=client, project="p", user_id="alice")
    await history.aadd_messages(langchain_conversation())
    block = NexusMemoryBlock(client=client, project="p", user_id="alice", session_id="li")
    await block.aput(llamaindex_conversation())

    lc = [(u, a, plain(m)) for u, a, m in await episodes(client, "lc")]
    li = [(u, a, plain(m)) for u, a, m in await episodes(client, "li")]
    assert lc[0] == li[0] == EXPECTED[0]
    # An image is kept as its kind; reasoning is not kept.
    assert lc[1] == ("And this one? [image_url]", "Oslo.", {})
    assert li[1] == ("And this one?\n[image]", "Oslo.", {})
    assert len(lc) == len(li) == 2  # "Thanks!" waits for its answer in both

    # Read back: what was kept before the exchange first, then the exchange.
    read = await history.aget_messages()
    assert [(type(m).__name__, m.content) for m in read[:4]] == [
        ("AIMessage", "Hello! How can I help?"),
        ("SystemMessage", "Answer briefly."),
        ("HumanMessage", "What's the weather in Paris?"),
        ("AIMessage", WEATHER_TURN),
    ]
    assert [m.content for m in read[-1:]] == ["Thanks!"]

    # Search reads the turn's tool result (the system prompt is in neither text above).
    await indexed(harness)
    project = await project_named(client, "p")
    found = [
        h.episode.ai_response
        async for h in client.search_episodes(
            query="sunny", project_id=project.id, mode=memory_pb2.SEARCH_MODE_KEYWORD
        )
    ]
    assert found[:2] == [WEATHER_TURN, WEATHER_TURN]


async def test_extraction_reads_the_tool_calling_turn(gh, stub):
    async with NexusClient(gh.target, retry=None) as client:
        history = NexusChatMessageHistory("x", client=client, project="p", user_id="alice")
        await history.aadd_messages(langchain_conversation()[2:6])
        [session] = (await client.list_sessions()).sessions

        async def extracted() -> bool:
            [episode] = (await client.list_episodes(session_id=session.id)).episodes
            return episode.extraction_state == memory_pb2.JOB_STATE_DONE

        await wait_until(extracted, timeout=30)
        prompts = [r.prompt_text() for r in stub.requests_to("/api/chat")]
        assert any("[tool result] get_weather: 18°C and sunny in Paris" in p for p in prompts)


# LlamaIndex's workflows inspect their pydantic models, which pydantic 2.x warns about.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect")
async def test_a_llamaindex_agent_with_tools_keeps_its_turn_through_memory(client):
    """LlamaIndex's own FunctionAgent and fake function-calling model (which calls
    every tool, then answers "Tool calls complete."); its Memory, kept small, flushes
    the first run's turn into the block when the second run begins."""
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms import mock
    from llama_index.core.tools import FunctionTool

    fake = getattr(mock, "MockFunctionCallingLLM", None)
    if fake is None:  # llama-index-core 0.14.0 has no fake function-calling model
        pytest.skip("this llama-index-core has no MockFunctionCallingLLM")

    def weather(city: str = "Paris") -> str:
        """The weather in a city."""
        return f"18°C and sunny in {city}"

    block = NexusMemoryBlock(client=client, project="p", user_id="alice")
    memory = Memory.from_defaults(
        session_id="agent", memory_blocks=[block], token_limit=8, tokenizer_fn=str.split
    )
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(weather)], llm=fake())
    await agent.run("What's the weather?", memory=memory)
    await agent.run("Thanks, and tomorrow?", memory=memory)
    [(user, answer, _)] = (await episodes(client, "agent"))[:1]
    assert user == "What's the weather?"
    assert answer.startswith('[tool call] weather({"city": "Paris"})\n\n')
    assert "[tool result] weather: 18°C and sunny in Paris" in answer
    assert answer.endswith("Tool calls complete.")
