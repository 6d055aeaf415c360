"""LangChain's chat history and retriever on nexus: ``NexusChatMessageHistory``
and ``NexusRetriever``.

``pip install 'nexus-grpc[langchain]'`` (``langchain-core``).

``NexusChatMessageHistory(session_id, client=..., project=..., user_id=...)``
is a ``BaseChatMessageHistory`` on one nexus session of the project: the
session's ``external_id`` is ``session_id`` when that is a UUID, else a
name-based UUID of the project and ``session_id`` (as ``nexus-grpc mcp``
names its sessions), created on the first write with ``user_id`` and
``agent_id`` as the conversation's user and agent, so the memories that
form from it are that user's. Messages are stored as exchanges: a user
message and the assistant's side (its answers, tool calls and tool results,
as text) make one episode, which extraction, memory formation, search and
summaries then read; system messages and an answer with no question are
kept beside the next exchange (``exchanges`` says how, for both chat
adapters). An exchange not yet complete (no answer yet, or a tool call
waiting) waits in the history object until it is (``messages`` shows it
meanwhile, as added); ``flush()`` writes it as it stands. ``messages``
reads the session's episodes in pages of 1,000: an exchange comes back as
the messages kept before it, the user message and one ``AIMessage``.
``clear()`` deletes the session with its episodes (memories formed from
them stay: they are the user's). Only a ``ChatMessage`` whose role is none
of the chat roles is refused (``ValueError``, numbering the message as
``messages`` would, in the whole conversation), before anything is written.

``NexusRetriever(kind="memories", client=..., project=..., user_id=...)`` is
a ``BaseRetriever`` over the project's episodes, memories (the project's and
``user_id``'s) or entities, with nexus's hybrid search (``mode``), the best
``k`` (at most 100; ``invoke(query, k=3)`` for one call). Each ``Document``
carries the hit's ``score``, ``sources`` and ids in its metadata
(``nexus_grpc.integrations.search_results``), and its ``id`` is the record's.

Give many histories one ``client=``: they share its channel, the thread
their synchronous methods run on, and the resolved project.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from nexus_grpc.client import NexusClient
from nexus_grpc.integrations import search_results
from nexus_grpc.integrations.adapter_client import AdapterClient, check_label
from nexus_grpc.integrations.chat_sessions import ConversationSession
from nexus_grpc.integrations.exchanges import Conversation, Role, Said, ToolCall, arguments_text

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.documents import Document
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
    )
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised by tests/e2e/frameworks' light install
    raise ImportError(
        "nexus_grpc.integrations.langchain needs LangChain: pip install 'nexus-grpc[langchain]'"
    ) from exc

__all__ = ["NexusChatMessageHistory", "NexusRetriever"]

_ROLES: dict[str, Role] = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}
# A streamed message's chunks (added whole once accumulated) name their type so.
_CHUNKS: dict[str, Role] = {
    "HumanMessageChunk": "user",
    "AIMessageChunk": "assistant",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
    "FunctionMessageChunk": "tool",
}
# Content blocks that are not what was said: tool calls (read from
# ``tool_calls``) and a model's reasoning.
_NOT_SAID = frozenset(
    {
        "tool_use",
        "tool_call",
        "tool_call_chunk",
        "invalid_tool_call",
        "server_tool_call",
        "server_tool_result",
        "reasoning",
        "thinking",
        "redacted_thinking",
    }
)


class _Refused(ValueError):
    def __init__(self, index: int, why: str) -> None:
        super().__init__(why)
        self.index = index
        self.why = why


def _text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = str(block.get("type") or "non-text content")
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind not in _NOT_SAID:
                parts.append(f" [{kind}] ")
    return "".join(parts).strip()


def _said(n: int, message: BaseMessage) -> Said:
    role = message.role if isinstance(message, ChatMessage) else message.type
    kind = _ROLES.get(role) or _CHUNKS.get(role)
    if kind is None:
        raise _Refused(
            n,
            f"is a {type(message).__name__} with role {role!r}, which is none of a chat's"
            f" roles ({', '.join(sorted(_ROLES))})",
        )
    calls: tuple[ToolCall, ...] = ()
    if isinstance(message, AIMessage):
        calls = tuple(
            ToolCall(c["name"], arguments_text(c.get("args", {})), c.get("id") or "")
            for c in message.tool_calls
        ) + tuple(
            ToolCall(
                c.get("name") or "tool", arguments_text(c.get("args") or ""), c.get("id") or ""
            )
            for c in message.invalid_tool_calls
        )
    return Said(
        kind,
        _text(message.content),
        calls,
        tool=(message.name or "") if kind == "tool" else "",
        call_id=getattr(message, "tool_call_id", "") or "",
        original=message,
    )


def _message(said: Said) -> BaseMessage:
    if said.original is not None:
        return said.original  # type: ignore[no-any-return]
    if said.role == "user":
        return HumanMessage(content=said.text)
    if said.role == "system":
        return SystemMessage(content=said.text)
    return AIMessage(content=said.text)


class NexusChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history on a nexus session; see the module."""

    def __init__(
        self,
        session_id: str,
        client: NexusClient | None = None,
        *,
        target: str | None = None,
        api_key: str | None = None,
        client_options: Mapping[str, Any] | None = None,
        project: str,
        user_id: str = "",
        agent_id: str = "",
    ) -> None:
        self._conn = AdapterClient(
            client=client,
            target=target,
            api_key=api_key,
            client_options=client_options,
            project=project,
            made_by="nexus-grpc's LangChain history",
        )
        self._session = ConversationSession(
            self._conn,
            session_id,
            user_id=user_id,
            agent_id=agent_id,
            source="nexus-grpc LangChain history",
        )
        self._conversation = Conversation()

    @property
    def session_id(self) -> str:
        return self._session.name

    @property
    def external_id(self) -> str:
        """The nexus session's ``external_id``."""
        return self._session.external_id

    # --- reading --------------------------------------------------------------------------

    async def _read(self, client: NexusClient) -> list[BaseMessage]:
        stored = await self._session.read(client)
        return [_message(s) for s in [*stored, *self._conversation.pending]]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return self._conn.run(self._read)

    async def aget_messages(self) -> list[BaseMessage]:
        return await self._conn.call(self._read)

    # --- writing --------------------------------------------------------------------------

    async def _add(self, client: NexusClient, messages: Sequence[BaseMessage]) -> None:
        try:
            said = [_said(n, m) for n, m in enumerate(messages)]
        except _Refused as refused:
            # Numbered in the conversation, as ``messages`` would number it.
            at = len(await self._read(client)) + refused.index
            raise ValueError(
                f"message {at} of the conversation (history.messages[{at}]; index"
                f" {refused.index} of the {len(messages)} added) {refused.why};"
                " nothing was written"
            ) from None
        exchanges, pending = self._conversation.plan(said)
        await self._session.write(client, exchanges)
        self._conversation.commit(pending)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self._conn.run(lambda client: self._add(client, messages))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await self._conn.call(lambda client: self._add(client, messages))

    async def _flush(self, client: NexusClient) -> None:
        waiting, rest = self._conversation.unanswered()
        if waiting is not None:
            await self._session.write(client, [waiting])
            self._conversation.commit(rest)

    def flush(self) -> None:
        """Writes the exchange still waiting (a question with no answer yet, or
        a turn whose tool calls wait), as it stands."""
        self._conn.run(self._flush)

    async def aflush(self) -> None:
        await self._conn.call(self._flush)

    def clear(self) -> None:
        self._conn.run(self._session.delete)
        self._conversation.commit([])

    async def aclear(self) -> None:
        await self._conn.call(self._session.delete)
        self._conversation.commit([])

    def close(self) -> None:
        self._conn.close()

    async def aclose(self) -> None:
        await self._conn.aclose()


class NexusRetriever(BaseRetriever):
    """A LangChain retriever over a nexus project's episodes, memories or entities."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: NexusClient | None = None
    target: str | None = None
    api_key: str | None = None
    client_options: dict[str, Any] | None = None
    project: str
    kind: Literal["episodes", "memories", "entities"] = "memories"
    #: Memories: whose USER memories are searched besides the project's.
    user_id: str = ""
    #: Memories: only this agent's (empty: every agent's).
    agent_id: str = ""
    include_archived: bool = False
    mode: Literal["hybrid", "keyword", "semantic"] = "hybrid"
    k: int = 4

    _conn: AdapterClient = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        check_label("user_id", self.user_id, required=False)
        check_label("agent_id", self.agent_id, required=False)
        search_results.check_search(self.kind, self.mode, self.k)
        self._conn = AdapterClient(
            client=self.client,
            target=self.target,
            api_key=self.api_key,
            client_options=self.client_options,
            project=self.project,
            made_by="nexus-grpc's LangChain retriever",
        )

    async def _search(self, client: NexusClient, query: str, k: int) -> list[Document]:
        scope = search_results.Scope(
            project_id=await self._conn.project_id(client),
            user_id=self.user_id,
            agent_id=self.agent_id,
            include_archived=self.include_archived,
        )
        found = await search_results.search(client, self.kind, query, k, scope, self.mode)
        return [Document(page_content=h.text, metadata=h.metadata, id=h.id) for h in found]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        limit = self.k if k is None else k
        search_results.check_search(self.kind, self.mode, limit)
        return self._conn.run(lambda client: self._search(client, query, limit))

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> list[Document]:
        limit = self.k if k is None else k
        search_results.check_search(self.kind, self.mode, limit)
        return await self._conn.call(lambda client: self._search(client, query, limit))

    def close(self) -> None:
        self._conn.close()

    async def aclose(self) -> None:
        await self._conn.aclose()
