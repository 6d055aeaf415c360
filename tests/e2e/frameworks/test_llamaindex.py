"""NexusMemoryBlock and NexusRetriever as LlamaIndex uses them: a chat engine whose
Memory flushes exchanges into the block (episodes, then the user's memories through the
LLM stand-in) and whose next conversation gets them selected into its prompt by
SelectMemories' two passes; a query engine over the retriever; LlamaIndex's MockLLM."""

from __future__ import annotations

import asyncio
import logging

import pytest
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.memory import Memory
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations.llamaindex import NexusMemoryBlock, NexusRetriever
from tests.e2e.frameworks.conftest import formed_memories, indexed, project_named, teach
from tests.graph_support import EMPTY
from tests.ollama_stub import Reply

STUB_DEFAULT_REPLY = EMPTY
PASS1 = "You choose which stored memories"
PASS2 = "You rank stored memories"


def words(text: str) -> list[str]:
    # A word count stands in for a tokenizer: tiktoken's would download its table.
    return text.split()


def chat_engine(block: NexusMemoryBlock, session_id: str) -> SimpleChatEngine:
    memory = Memory.from_defaults(
        session_id=session_id,
        memory_blocks=[block],
        tokenizer_fn=words,
        # Small, so that the first exchange is flushed to the block within a few turns.
        token_limit=40,
    )
    return SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)


async def episodes_of(client: NexusClient) -> list[tuple[str, str, str]]:
    out = []
    for session in (await client.list_sessions()).sessions:
        page = await client.list_episodes(session_id=session.id, page_size=100)
        out += [(session.name, e.user_message, e.ai_response) for e in reversed(page.episodes)]
    return out


async def test_a_chat_engine_remembers_the_user_across_conversations(gh, stub):
    async with NexusClient(gh.target, retry=None) as client:
        block = NexusMemoryBlock(client=client, project="tea-shop", user_id="alice")
        said = "I love green tea, especially sencha."
        teach(stub, said, "The user loves green tea, especially sencha.")

        morning = chat_engine(block, "morning")
        await morning.achat(said)
        for n in range(3):
            await morning.achat(f"Tell me something about the weather, part {n}")
        # The memory flushed its oldest exchanges into the block: episodes of the
        # conversation's session, for alice.
        stored = await episodes_of(client)
        assert stored[0][:2] == ("morning", said) and stored[0][2]
        project = await project_named(client, "tea-shop")
        session = (await client.list_sessions()).sessions[0]
        assert session.user_id == "alice" and session.project_id == project.id

        # Formation turned what she said into her memory.
        [memory] = await formed_memories(client, project.id, "alice")
        assert memory.content == "The user loves green tea, especially sencha."

        # A new conversation: the block selects it for the prompt, in two passes.
        stub.add_rule(
            Reply.of({"selected": [{"id": memory.id, "relevance": 0.9, "category": "necessary"}]}),
            contains=PASS1,
        )
        stub.add_rule(Reply.of({"ranked": [{"id": memory.id, "relevance": 0.95}]}), contains=PASS2)
        evening = chat_engine(block, "evening")
        answer = await evening.achat("What should I drink tonight?")
        # MockLLM answers with the prompt it was given: the memory is in it.
        assert "- The user loves green tea, especially sencha." in str(answer)
        prompts = [r.prompt_text() for r in stub.requests_to("/api/chat")]
        assert any(PASS1 in p for p in prompts) and any(PASS2 in p for p in prompts)
        usage = await client.list_memory_usage(
            thread_id="evening", user_id="alice", project_id=project.id
        )
        assert [u.memory_id for u in usage.usage] == [memory.id]


async def test_the_block_selects_only_its_users_memories(harness, client):
    """Without an LLM, SelectMemories ranks semantically; the scope is still the user's."""
    block = NexusMemoryBlock(client=client, project="p", user_id="bob")
    alice = NexusMemoryBlock(client=client, project="p", user_id="alice")
    await alice.aput([], session_id="x")  # nothing to write: nothing created
    assert (await client.list_sessions()).sessions == []
    project_id = await NexusRetriever(client=client, project="p")._conn.project_id(client)
    for user, text in [("alice", "Alice drinks oolong tea"), ("bob", "Bob drinks black coffee")]:
        await client.create_memory(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER,
                title=text,
                content=text,
                project_id=project_id,
                user_id=user,
            )
        )
    await indexed(harness)
    from llama_index.core.base.llms.types import ChatMessage

    content = await block.aget([ChatMessage(role="user", content="What do I drink?")])
    assert content == "- Bob drinks black coffee"
    assert await block.aget([]) == ""  # no user message: nothing to select for


async def test_flushed_messages_outside_an_exchange_are_kept_beside_the_next(client):
    """An answer whose question was flushed before the block existed, and a system
    prompt, are kept with the next exchange (test_chat_turns: as LangChain's history)."""
    from llama_index.core.base.llms.types import ChatMessage

    block = NexusMemoryBlock(client=client, project="p", user_id="alice", session_id="c")
    await block.aput(
        [
            ChatMessage(role="assistant", content="(an answer whose question went earlier)"),
            ChatMessage(role="system", content="Be brief."),
            ChatMessage(role="user", content="What's 6 x 7?"),
            ChatMessage(role="assistant", content="42."),
            ChatMessage(role="user", content="Thanks!"),
        ]
    )
    assert await episodes_of(client) == [("c", "What's 6 x 7?", "42.")]
    [session] = (await client.list_sessions()).sessions
    [episode] = (await client.list_episodes(session_id=session.id)).episodes
    assert [dict(m.items()) for m in episode.metadata["messages_before"]] == [
        {"role": "assistant", "text": "(an answer whose question went earlier)"},
        {"role": "system", "text": "Be brief."},
    ]
    await block.aput([ChatMessage(role="assistant", content="You're welcome.")])
    assert (await episodes_of(client))[-1] == ("c", "Thanks!", "You're welcome.")


async def test_an_empty_selection_says_the_servers_reason_on_the_block_and_in_the_log(
    gh, stub, caplog
):
    from llama_index.core.base.llms.types import ChatMessage

    async with NexusClient(gh.target, retry=None) as client:
        block = NexusMemoryBlock(client=client, project="p", user_id="alice")
        asked = [ChatMessage(role="user", content="What do I drink?")]
        assert block.empty_reason is None
        # Nothing stored yet: the server says so.
        with caplog.at_level(logging.INFO, logger="nexus_grpc.integrations.llamaindex"):
            assert await block.aget(asked) == ""
        assert block.empty_reason.startswith("NOTHING_STORED: ")
        [record] = [r for r in caplog.records if r.name == "nexus_grpc.integrations.llamaindex"]
        assert record.getMessage() == (
            f"NexusMemoryBlock selected no memory of user 'alice' for the prompt:"
            f" {block.empty_reason}"
        )
        # A memory the selection model (the stand-in) reads and chooses none of.
        project_id = await block._conn.project_id(client)
        memory = await client.create_memory(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER,
                title="Alice drinks oolong tea",
                content="Alice drinks oolong tea",
                project_id=project_id,
                user_id="alice",
            )
        )
        stub.add_rule(Reply.of({"selected": []}), contains=PASS1, times=1)
        assert await block.aget(asked, session_id="s") == ""
        assert block.empty_reason.startswith("MODEL_CHOSE_NONE: the selection model read the")
        stub.add_rule(
            Reply.of({"selected": [{"id": memory.id, "relevance": 0.9, "category": "necessary"}]}),
            contains=PASS1,
        )
        stub.add_rule(Reply.of({"ranked": [{"id": memory.id, "relevance": 0.9}]}), contains=PASS2)
        assert await block.aget(asked, session_id="s2") == "- Alice drinks oolong tea"
        assert block.empty_reason is None


async def test_a_query_engine_answers_from_the_retrievers_nodes(harness, client):
    retriever = NexusRetriever(client=client, project="p", kind="memories", user_id="alice")
    project_id = await retriever._conn.project_id(client)
    for user, text in [("alice", "Alice's bike is a red Bianchi"), ("bob", "Bob's bike is blue")]:
        await client.create_memory(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER,
                title=text,
                content=text,
                project_id=project_id,
                user_id=user,
            )
        )
    await indexed(harness)
    nodes = await retriever.aretrieve("what colour is the bike?")
    assert [n.node.get_content() for n in nodes] == ["Alice's bike is a red Bianchi"]
    [node] = nodes
    assert isinstance(node, NodeWithScore) and 0 < node.score <= 1
    assert node.node.node_id == str(node.node.metadata["id"])
    assert node.node.metadata["kind"] == "memory" and node.node.metadata["user_id"] == "alice"
    assert node.node.metadata["sources"]

    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = await engine.aquery("what colour is the bike?")
    assert [n.node.get_content() for n in response.source_nodes] == [
        "Alice's bike is a red Bianchi"
    ]
    assert "Alice's bike is a red Bianchi" in str(response)
    # The sync API, from a thread.
    synced = await asyncio.to_thread(retriever.retrieve, QueryBundle("bike"))
    assert [n.node.node_id for n in synced] == [node.node.node_id]
    retriever.close()


async def test_bad_settings_are_refused_before_any_call(client):
    for bad in ({"limit": 0}, {"limit": 101}, {"user_id": ""}, {"user_id": "a\nb"}):
        with pytest.raises(ValueError):
            NexusMemoryBlock(client=client, project="p", **{"user_id": "alice", **bad})
    for bad in ({"similarity_top_k": 0}, {"kind": "chats"}, {"mode": "vector"}):
        with pytest.raises(ValueError):
            NexusRetriever(client=client, project="p", **bad)
    assert (await client.list_projects()).projects == []
