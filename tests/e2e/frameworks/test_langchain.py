"""NexusChatMessageHistory and NexusRetriever as LangChain uses them: a chain with
history (RunnableWithMessageHistory) whose exchanges become episodes and, through the
LLM stand-in, the user's memories; a retrieval chain; LangChain's fake chat model.

The adapters' own rules run on a stand-in client in
tests/unit/test_adapters_langchain_on_a_stand_in.py: a refused message numbered in the
conversation, a conversation another user or project recorded, each kind of hit's
metadata, a bad ``k``, kind or mode refused before any call. Here, each path once
against a real server."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.runnables.history import RunnableWithMessageHistory

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations.langchain import NexusChatMessageHistory, NexusRetriever
from tests.e2e.frameworks.conftest import (
    all_memories,
    formed_memories,
    indexed,
    project_named,
    teach,
)
from tests.graph_support import EMPTY

STUB_DEFAULT_REPLY = EMPTY
# LangChain 1.x points agents at LangGraph's persistence; chains with history still use this.
pytestmark = pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")


def fake_model(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))


async def episodes_of(client: NexusClient, history: NexusChatMessageHistory) -> list[tuple]:
    session = await client.get_session(external_id=history.external_id)
    page = await client.list_episodes(session_id=session.id, page_size=100)
    return [(e.user_message, e.ai_response) for e in reversed(page.episodes)]  # newest first


async def test_a_chain_with_history_stores_exchanges_and_the_users_memories_form(gh, stub):
    async with NexusClient(gh.target, retry=None) as client:
        prompt = ChatPromptTemplate.from_messages(
            [
                ("system", "You are a cooking assistant."),
                MessagesPlaceholder("history"),
                ("human", "{question}"),
            ]
        )
        prompts: list[list] = []

        def seen(value):
            prompts.append(value.to_messages())
            return value

        chain = prompt | RunnableLambda(seen) | fake_model("Noted!", "Try a mushroom risotto.")
        chat = RunnableWithMessageHistory(
            chain,
            lambda session_id: NexusChatMessageHistory(
                session_id, client=client, project="kitchen", user_id="alice"
            ),
            input_messages_key="question",
            history_messages_key="history",
        )
        said = "I'm vegetarian, so please never suggest meat."
        teach(stub, said, "The user is vegetarian.")
        config = {"configurable": {"session_id": "dinner-chat"}}
        await chat.ainvoke({"question": said}, config)
        await chat.ainvoke({"question": "What should I cook tonight?"}, config)

        # The second prompt carried the first exchange, read back from nexus.
        assert [m.content for m in prompts[1]] == [
            "You are a cooking assistant.",
            said,
            "Noted!",
            "What should I cook tonight?",
        ]
        history = NexusChatMessageHistory(
            "dinner-chat", client=client, project="kitchen", user_id="alice"
        )
        assert await episodes_of(client, history) == [
            (said, "Noted!"),
            ("What should I cook tonight?", "Try a mushroom risotto."),
        ]
        # Extraction and formation ran on the exchange: the user's memory formed.
        project = await project_named(client, "kitchen")
        [memory] = await formed_memories(client, project.id, "alice")
        assert memory.content == "The user is vegetarian."
        assert memory.source == memory_pb2.MEMORY_SOURCE_FORMATION
        session = await client.get_session(external_id=history.external_id)
        assert session.user_id == "alice" and session.project_id == project.id


async def test_messages_pair_into_episodes_across_calls(client):
    history = NexusChatMessageHistory("c1", client=client, project="p", user_id="alice")
    assert await history.aget_messages() == []  # reading creates nothing
    assert (await client.list_sessions()).sessions == []

    await history.aadd_messages([HumanMessage("Hi, I'm Alice.")])
    # The question waits for its answer; it is shown meanwhile.
    assert [m.content for m in await history.aget_messages()] == ["Hi, I'm Alice."]
    assert (await client.list_sessions()).sessions == []
    await history.aadd_messages([AIMessage("Hello Alice!")])
    await history.aadd_messages(
        [HumanMessage("Two things:"), HumanMessage("tea or coffee?"), AIMessage("Tea."),
         AIMessage("Always tea.")]
    )  # fmt: skip
    assert await episodes_of(client, history) == [
        ("Hi, I'm Alice.", "Hello Alice!"),
        ("Two things:\n\ntea or coffee?", "Tea.\n\nAlways tea."),
    ]
    read = await history.aget_messages()
    assert [(type(m), m.content) for m in read] == [
        (HumanMessage, "Hi, I'm Alice."),
        (AIMessage, "Hello Alice!"),
        (HumanMessage, "Two things:\n\ntea or coffee?"),
        (AIMessage, "Tea.\n\nAlways tea."),
    ]
    # A question left unanswered is written alone on flush.
    await history.aadd_messages([HumanMessage("Are you there?")])
    await history.aflush()
    assert (await episodes_of(client, history))[-1] == ("Are you there?", "")
    # Another history object on the same conversation reads the same messages.
    again = NexusChatMessageHistory("c1", client=client, project="p", user_id="alice")
    assert [m.content for m in await again.aget_messages()][-1] == "Are you there?"

    await again.aclear()
    assert await history.aget_messages() == []
    assert (await client.list_sessions()).sessions == []


async def test_the_sync_api_works_from_a_thread(client):
    history = NexusChatMessageHistory("sync-chat", client=client, project="p", user_id="bob")

    def program() -> list[str]:
        history.add_user_message("What's the capital of France?")
        history.add_ai_message("Paris.")
        return [m.content for m in history.messages]

    assert await asyncio.to_thread(program) == ["What's the capital of France?", "Paris."]
    await asyncio.to_thread(history.clear)
    assert await history.aget_messages() == []


async def test_a_servers_refusal_keeps_its_message_and_nothing_is_written(client):
    huge = "x" * 100_001
    other = NexusChatMessageHistory("c3", client=client, project="p", user_id="alice")
    with pytest.raises(ValueError, match="user_message is 100001 characters"):
        await other.aadd_messages([HumanMessage(huge), AIMessage("ok")])
    assert await other.aget_messages() == []


async def seed(client: NexusClient, harness) -> int:
    """A project with two conversations, memories of two users and two entities."""
    for user, text in [("alice", "Alice's cat is called Mochi"), ("bob", "Bob's cat is Felix")]:
        history = NexusChatMessageHistory(f"{user}-chat", client=client, project="p", user_id=user)
        await history.aadd_messages([HumanMessage(text), AIMessage("What a lovely cat!")])
    project = await project_named(client, "p")
    memories = [
        ("alice", memory_pb2.MEMORY_KIND_USER, "Alice's cat Mochi eats salmon"),
        ("bob", memory_pb2.MEMORY_KIND_USER, "Bob's cat Felix eats tuna"),
        ("", memory_pb2.MEMORY_KIND_PROJECT, "Cats in this household eat twice a day"),
    ]
    for user, kind, content in memories:
        await client.create_memory(
            memory=memory_pb2.Memory(
                kind=kind, title=content, content=content, project_id=project.id, user_id=user
            )
        )
    for name, notes in [("Mochi", "Alice's cat"), ("Felix", "Bob's cat")]:
        await client.upsert_entity(name=name, type="concept", notes=notes, project_id=project.id)
    await indexed(harness)
    return project.id


async def test_a_retrieval_chain_gets_documents_with_scores_sources_and_ids(harness, client):
    project_id = await seed(client, harness)
    retriever = NexusRetriever(client=client, project="p", kind="memories", user_id="alice")
    docs = await retriever.ainvoke("what does the cat eat?")
    contents = [d.page_content for d in docs]
    assert contents[0] == "Alice's cat Mochi eats salmon"
    assert set(contents) == {
        "Alice's cat Mochi eats salmon",
        "Cats in this household eat twice a day",
    }
    top = docs[0]
    assert top.id == str(top.metadata["id"])
    assert top.metadata["kind"] == "memory" and top.metadata["user_id"] == "alice"
    assert top.metadata["project_id"] == project_id and top.metadata["memory_kind"] == "user"
    assert 0 < top.metadata["score"] <= 1 and set(top.metadata["sources"]) <= {
        "keyword",
        "semantic",
    }
    assert top.metadata["sources"]

    # Inside a chain: retriever, then a prompt, then LangChain's fake model.
    prompts: list[str] = []

    def prompt(inputs: dict) -> list:
        context = "\n".join(d.page_content for d in inputs["context"])
        prompts.append(context)
        return [SystemMessage(f"Context:\n{context}"), HumanMessage(inputs["question"])]

    chain = (
        {"context": retriever, "question": RunnablePassthrough()}
        | RunnableLambda(prompt)
        | fake_model("Salmon.")
    )
    answer = await chain.ainvoke("what does the cat eat?")
    assert answer.content == "Salmon." and "Alice's cat Mochi eats salmon" in prompts[0]
    assert "Felix" not in prompts[0]  # Bob's memory never reaches Alice's chain

    episodes = NexusRetriever(client=client, project="p", kind="episodes", k=1)
    [doc] = await episodes.ainvoke("Mochi")
    assert doc.page_content == "User: Alice's cat is called Mochi\nAssistant: What a lovely cat!"
    assert doc.metadata["kind"] == "episode" and doc.metadata["session_id"] > 0
    assert "[Mochi]" in doc.metadata["snippet"]

    entities = NexusRetriever(client=client, project="p", kind="entities", k=1)
    [entity] = await entities.ainvoke("Mochi")
    assert entity.page_content == "Mochi (concept): Alice's cat"
    assert entity.metadata["name"] == "Mochi" and entity.metadata["kind"] == "entity"


async def test_k_is_the_number_of_documents_as_langchains_standard_tests_ask(harness, client):
    """What langchain-tests' RetrieversIntegrationTests checks: ``k`` in the constructor
    and in invoke, Documents back from invoke and ainvoke."""
    await seed(client, harness)
    three = NexusRetriever(client=client, project="p", kind="memories", user_id="alice", k=3)
    one = NexusRetriever(client=client, project="p", kind="memories", user_id="alice", k=1)
    assert len(await asyncio.to_thread(three.invoke, "cat")) == 2  # only two are Alice's to see
    assert len(await asyncio.to_thread(one.invoke, "cat")) == 1
    everyone = NexusRetriever(client=client, project="p", kind="episodes")
    assert len(await asyncio.to_thread(everyone.invoke, "cat", None, k=1)) == 1
    docs = await everyone.ainvoke("cat", k=2)
    assert len(docs) == 2 and all(isinstance(d, Document) for d in docs)


async def test_nothing_is_left_behind_by_a_refused_retrieval(client):
    retriever = NexusRetriever(client=client, project="p", kind="memories")
    with pytest.raises(ValueError, match="query is 2001 characters"):
        await retriever.ainvoke("x" * 2001)
    project = await project_named(client, "p")
    assert await all_memories(client, project.id) == []
