"""LangChain's history and retriever (integrations/langchain.py), the conversation's
session under them (integrations/chat_sessions.py), the search they share
(integrations/search_results.py) and the connection every adapter calls through
(integrations/adapter_client.py), on a stand-in client: a ``NexusClient`` whose RPC
methods answer from rows this module holds, so the adapters' own rules run in-process.

Here: reading creates nothing, exchanges pair and read back oldest first across
pages, a conversation another user (or project) recorded is refused, a refused
message is numbered in the whole conversation with nothing written, each kind of hit
carries its metadata, a bad ``k``/kind/mode is refused before any call, a refusal
leaves as its conventional Python class, and the project is resolved once.
Only the async paths: the synchronous ones cross a thread to a copy of the client
(tests/e2e/frameworks/test_langchain.py's ``test_the_sync_api_works_from_a_thread``).
(The adapters against a real server, the LLM stand-in and LangChain's chains:
tests/e2e/frameworks/test_langchain.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage

from nexus_grpc.client import NexusClient, NexusClientError, NexusInvalidArgument
from nexus_grpc.client.views import view
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations.adapter_client import AdapterClient
from nexus_grpc.integrations.langchain import NexusChatMessageHistory, NexusRetriever


class Hits:
    """A server stream's stand-in: iterated once, asynchronously."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    async def _each(self) -> AsyncIterator[Any]:
        for item in self.items:
            yield view(item)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._each()


class StandIn(NexusClient):
    """The RPCs the adapters make, over rows of its own; no channel is ever opened.
    ``list_episodes`` pages by ``PAGE`` whatever is asked, newest first as the server."""

    PAGE = 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("stand-in:0")
        self.projects: list[memory_pb2.Project] = []
        self.sessions: dict[str, memory_pb2.Session] = {}
        self.episodes: list[memory_pb2.Episode] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.hits: dict[str, list[Any]] = {}
        self.refuse: NexusClientError | None = None

    def called(self, name: str) -> list[dict[str, Any]]:
        return [fields for called, fields in self.calls if called == name]

    def _note(self, name: str, fields: dict[str, Any]) -> None:
        self.calls.append((name, fields))
        if self.refuse is not None and name.startswith(("create", "search")):
            raise self.refuse

    async def list_projects(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("list_projects", fields)
        return view(memory_pb2.ListProjectsResponse(projects=self.projects))

    async def get_service_status(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("get_service_status", fields)
        return view(memory_pb2.ServiceStatus(tenant="t1"))

    async def create_project(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("create_project", fields)
        project = memory_pb2.Project(id=len(self.projects) + 1, name=fields["project"].name,
                                     tenant="t1")  # fmt: skip
        self.projects.append(project)
        return view(project)

    async def get_session(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("get_session", fields)
        session = self.sessions.get(fields["external_id"])
        if session is None:
            raise NexusClientError(grpc.StatusCode.NOT_FOUND, "no such session")
        return view(session)

    async def create_session(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("create_session", fields)
        session = memory_pb2.Session()
        session.CopyFrom(fields["session"])
        session.id = 10 + len(self.sessions)
        self.sessions[session.external_id] = session
        return view(session)

    async def delete_session(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("delete_session", fields)
        self.sessions = {k: s for k, s in self.sessions.items() if s.id != fields["id"]}
        self.episodes = [e for e in self.episodes if e.session_id != fields["id"]]
        return view(memory_pb2.DeleteSessionResponse())

    async def create_episode(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("create_episode", fields)
        episode = memory_pb2.Episode(
            id=len(self.episodes) + 1, session_id=fields["session_id"],
            user_message=fields["user_message"], ai_response=fields["ai_response"],
        )  # fmt: skip
        if fields.get("metadata"):
            json_format.ParseDict(fields["metadata"], episode.metadata)
        self.episodes.append(episode)
        return view(episode)

    async def list_episodes(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("list_episodes", fields)
        newest_first = [e for e in reversed(self.episodes) if e.session_id == fields["session_id"]]
        start = int(fields.get("page_token") or 0)
        page = newest_first[start : start + self.PAGE]
        more = start + self.PAGE < len(newest_first)
        return view(memory_pb2.ListEpisodesResponse(
            episodes=page, next_page_token=str(start + self.PAGE) if more else "",
        ))  # fmt: skip

    def search_episodes(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("search_episodes", fields)
        return Hits(self.hits["episodes"])

    def search_memories(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("search_memories", fields)
        return Hits(self.hits["memories"])

    def search_entities(self, **fields: Any) -> Any:  # type: ignore[override]
        self._note("search_entities", fields)
        return Hits(self.hits["entities"])


@pytest.fixture
def client() -> StandIn:
    return StandIn()


def history(client: StandIn, name: str = "c1", user: str = "alice") -> NexusChatMessageHistory:
    return NexusChatMessageHistory(name, client=client, project="p", user_id=user)


def stored(client: StandIn) -> list[tuple[str, str]]:
    return [(e.user_message, e.ai_response) for e in client.episodes]


# --- the history -----------------------------------------------------------------------


async def test_reading_creates_nothing_and_a_question_waits_for_its_answer(client):
    chat = history(client)
    assert await chat.aget_messages() == []
    await chat.aadd_messages([HumanMessage("Hi, I'm Alice.")])
    assert [m.content for m in await chat.aget_messages()] == ["Hi, I'm Alice."]
    assert client.called("create_session") == [] and client.episodes == []
    await chat.aadd_messages([AIMessage("Hello Alice!")])
    assert stored(client) == [("Hi, I'm Alice.", "Hello Alice!")]
    [created] = client.called("create_session")
    session = created["session"]
    assert (session.project_id, session.user_id, session.name) == (1, "alice", "c1")
    assert session.external_id == chat.external_id
    assert dict(session.metadata) == {"source": "nexus-grpc LangChain history"}


async def test_exchanges_read_back_oldest_first_across_pages_with_what_came_before(client):
    chat = history(client)
    await chat.aadd_messages([SystemMessage("Be brief."), HumanMessage("One?"), AIMessage("1.")])
    for n in ("Two", "Three"):
        await chat.aadd_messages([HumanMessage(f"{n}?"), AIMessage(f"{n}.")])
    await chat.aadd_messages([HumanMessage("Four?")])
    await chat.aflush()  # the unanswered question, written alone
    assert stored(client)[-1] == ("Four?", "")
    assert client.episodes[0].metadata["messages_before"][0]["text"] == "Be brief."
    again = history(client)  # another object on the same conversation
    read = await again.aget_messages()
    assert [(type(m), m.content) for m in read] == [
        (SystemMessage, "Be brief."), (HumanMessage, "One?"), (AIMessage, "1."),
        (HumanMessage, "Two?"), (AIMessage, "Two."), (HumanMessage, "Three?"),
        (AIMessage, "Three."), (HumanMessage, "Four?"),
    ]  # fmt: skip
    assert [c["page_token"] for c in client.called("list_episodes")] == ["", "2"]  # two pages
    await again.aclear()
    assert await chat.aget_messages() == [] and client.sessions == {}


async def test_a_message_with_no_chat_role_is_numbered_in_the_conversation_and_nothing_written(
    client,
):
    chat = history(client)
    await chat.aadd_messages([HumanMessage("Hi"), AIMessage("Hello!")])
    await chat.aadd_messages([HumanMessage("Tea?"), AIMessage("Yes."), HumanMessage("Now?")])
    before = stored(client)
    # Messages 0-3 are stored, 4 waits for its answer: the refused one is number 6.
    with pytest.raises(ValueError) as refused:
        await chat.aadd_messages([AIMessage("Now."), ChatMessage("Hmm.", role="critic")])
    assert str(refused.value).startswith(
        "message 6 of the conversation (history.messages[6]; index 1 of the 2 added) is a"
        " ChatMessage with role 'critic'"
    )
    assert str(refused.value).endswith("; nothing was written")
    assert stored(client) == before
    with pytest.raises(ValueError, match="user_id must not start or end with whitespace"):
        history(client, "c2", " alice")
    assert [m.content for m in await chat.aget_messages()] == ["Hi", "Hello!", "Tea?", "Yes.",
                                                                "Now?"]  # fmt: skip


async def test_a_conversation_recorded_for_another_user_is_not_written_into(client):
    alice = history(client, "shared-name", "alice")
    await alice.aadd_messages([HumanMessage("My PIN is 1234"), AIMessage("Noted.")])
    mallory = history(client, "shared-name", "mallory")
    with pytest.raises(ValueError, match="the conversation of user 'alice', not of 'mallory'"):
        await mallory.aget_messages()
    with pytest.raises(ValueError, match="the conversation of user 'alice'"):
        await mallory.aadd_messages([HumanMessage("hi"), AIMessage("hello")])
    with pytest.raises(ValueError, match="the conversation of user 'alice'"):
        await mallory.aclear()
    assert len(client.episodes) == 1 and len(client.sessions) == 1


async def test_a_conversation_in_another_project_is_refused_naming_both(client):
    chat = history(client)
    client.projects = [memory_pb2.Project(id=1, name="p", tenant="t1")]
    client.sessions[chat.external_id] = memory_pb2.Session(
        id=44, external_id=chat.external_id, project_id=9, user_id="alice"
    )
    with pytest.raises(ValueError) as refused:
        await chat.aget_messages()
    assert str(refused.value) == (
        "session_id 'c1' is nexus session 44, which belongs to project 9, not to project 'p' (1)"
    )


async def test_a_servers_refusal_leaves_as_its_own_class_and_pythons(client):
    client.refuse = NexusClientError(grpc.StatusCode.INVALID_ARGUMENT, "user_message is too long")
    with pytest.raises(NexusInvalidArgument) as refused:
        await history(client).aadd_messages([HumanMessage("x"), AIMessage("ok")])
    assert isinstance(refused.value, ValueError)
    assert str(refused.value) == "INVALID_ARGUMENT: user_message is too long"


# --- the connection --------------------------------------------------------------------


def test_an_adapter_takes_a_client_or_a_target_and_a_client_carries_its_own_options(client):
    def connect(**given: Any) -> AdapterClient:
        settings = {"client": None, "target": None, "api_key": None, "client_options": None}
        return AdapterClient(**(settings | given), project="p", made_by="test")

    with pytest.raises(ValueError, match="pass either client= .* or target="):
        connect()
    with pytest.raises(ValueError, match="pass either client="):
        connect(client=client, target="h:1")
    with pytest.raises(ValueError, match="a client= passed in carries its own"):
        connect(client=client, api_key="k")
    with pytest.raises(ValueError, match="client must be a NexusClient, got str"):
        connect(client="h:1")
    with pytest.raises(ValueError, match="project must not be blank"):
        AdapterClient(client=client, target=None, api_key=None, client_options=None,
                      project=" ", made_by="test")  # fmt: skip
    assert connect(target="h:1", api_key="k").project == "p"


async def test_the_project_is_resolved_once_for_every_adapter_on_the_client(client):
    await history(client, "a").aadd_messages([HumanMessage("q"), AIMessage("a")])
    await history(client, "b").aadd_messages([HumanMessage("q"), AIMessage("a")])
    await history(client, "a").aget_messages()
    assert len(client.called("create_project")) == 1
    assert client.called("create_project")[0]["project"].description == (
        "created by nexus-grpc's LangChain history on first use"
    )
    assert len(client.called("list_projects")) == 1


# --- the retriever ---------------------------------------------------------------------


def memory_hit() -> memory_pb2.MemoryHit:
    memory = memory_pb2.Memory(
        id=7, title="Mochi eats salmon", content="Alice's cat Mochi eats salmon",
        kind=memory_pb2.MEMORY_KIND_USER, tier=memory_pb2.TIER_LONGTERM, project_id=1,
        user_id="alice",
    )  # fmt: skip
    return memory_pb2.MemoryHit(
        memory=memory, score=0.75, sources=[memory_pb2.SEARCH_SOURCE_SEMANTIC], reranked=True
    )


async def test_memory_documents_carry_the_hit_and_the_memory_and_the_scope_is_the_retrievers(
    client,
):
    client.projects = [memory_pb2.Project(id=1, name="p", tenant="t1")]
    client.hits["memories"] = [memory_hit()]
    retriever = NexusRetriever(client=client, project="p", user_id="alice", agent_id="bot",
                               include_archived=True, mode="keyword", k=3)  # fmt: skip
    [doc] = await retriever.ainvoke("what does the cat eat?")
    asked = client.called("search_memories")[0]
    assert asked["scope"] == memory_pb2.MemoryScope(
        project_id=1, user_id="alice", agent_id="bot", include_archived=True
    )
    assert (asked["limit"], asked["mode"]) == (3, memory_pb2.SEARCH_MODE_KEYWORD)
    assert (doc.id, doc.page_content) == ("7", "Alice's cat Mochi eats salmon")
    assert doc.metadata == {
        "kind": "memory", "id": 7, "score": 0.75, "sources": ["semantic"], "reranked": True,
        "title": "Mochi eats salmon", "memory_kind": "user", "tier": "longterm",
        "project_id": 1, "user_id": "alice", "agent_id": "", "session_id": 0,
        "create_time": None, "update_time": None,
    }  # fmt: skip


async def test_episode_and_entity_documents_carry_their_own_fields(client):
    client.projects = [memory_pb2.Project(id=1, name="p", tenant="t1")]
    episode = memory_pb2.Episode(id=3, session_id=12, user_message="Mochi?", ai_response="A cat.")
    episode.occur_time.FromSeconds(1_765_065_600)
    client.hits["episodes"] = [memory_pb2.SearchHit(
        episode=episode, score=0.5, snippet="[Mochi]?", degraded_reason="keyword only",
        sources=[memory_pb2.SEARCH_SOURCE_KEYWORD],
    )]  # fmt: skip
    [doc] = await NexusRetriever(client=client, project="p", kind="episodes", k=1).ainvoke("Mochi")
    assert client.called("search_episodes")[0] == {
        "query": "Mochi", "project_id": 1, "limit": 1, "mode": memory_pb2.SEARCH_MODE_HYBRID,
    }  # fmt: skip
    assert doc.page_content == "User: Mochi?\nAssistant: A cat."
    assert doc.metadata == {
        "kind": "episode", "id": 3, "score": 0.5, "sources": ["keyword"], "reranked": False,
        "degraded_reason": "keyword only", "session_id": 12, "project_id": 1,
        "occur_time": "2025-12-07T00:00:00+00:00", "snippet": "[Mochi]?",
    }  # fmt: skip
    entity = graph_pb2.Entity(id=4, name="Mochi", type="concept", notes="Alice's cat",
                              aliases=["Mo"], mention_count=2, project_id=1)  # fmt: skip
    client.hits["entities"] = [
        graph_pb2.EntityHit(entity=entity, score=0.9),
        graph_pb2.EntityHit(entity=graph_pb2.Entity(id=5, name="Felix", type="concept")),
    ]
    docs = await NexusRetriever(client=client, project="p", kind="entities").ainvoke("Mochi")
    assert [d.page_content for d in docs] == ["Mochi (concept): Alice's cat", "Felix (concept)"]
    assert docs[0].metadata == {
        "kind": "entity", "id": 4, "score": pytest.approx(0.9), "reranked": False,
        "name": "Mochi", "type": "concept", "aliases": ["Mo"], "mention_count": 2,
        "project_id": 1,
    }  # fmt: skip


async def test_a_bad_k_kind_or_mode_is_refused_before_any_call(client):
    for bad in ({"k": 0}, {"k": 101}, {"kind": "summaries"}, {"mode": "fuzzy"},
                {"user_id": " alice"}):  # fmt: skip
        with pytest.raises(ValueError):
            NexusRetriever(client=client, project="p", **bad)
    retriever = NexusRetriever(client=client, project="p", kind="episodes")
    with pytest.raises(ValueError, match="k must be an integer from 1 to 100; got 500"):
        await retriever.ainvoke("cat", k=500)
    assert client.calls == []
