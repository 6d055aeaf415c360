"""LlamaIndex's memory block and retriever on nexus: ``NexusMemoryBlock`` and
``NexusRetriever``.

``pip install 'nexus-grpc[llamaindex]'`` (``llama-index-core``).

``NexusMemoryBlock(client=..., project=..., user_id=...)`` is a memory block
for LlamaIndex's ``Memory``
(``Memory.from_defaults(memory_blocks=[block])``):

- Read (``aget``, each time the memory builds a prompt): the user's memories
  chosen for the latest user message by ``SelectMemories`` (its two
  passes: a fast pass over titles, then ranking; the semantic ranking when
  no LLM answers), at most ``limit``, one per line. The memory's
  ``session_id`` is the selection's thread, so memories already used in
  the conversation rank lower, and usage is recorded.
  When it selects nothing, ``empty_reason`` is the server's reason (its
  ``x-nexus-empty-reason``: ``CODE: sentence``), also logged at INFO.
- Write (``aput``, the messages the memory flushes from its short-term
  history): the exchanges, as episodes of the conversation's nexus session
  (``session_id``, or the memory's; created in the project on first write
  for ``user_id``), so that memory formation turns what the user states
  into their memories. A tool-calling turn is one exchange, its tool calls
  and results kept in the answer's text; system messages and an answer
  with no question are kept beside the next exchange: as LangChain's history
  keeps them (``exchanges``).

``NexusRetriever(kind="memories", client=..., project=..., user_id=...)`` is
a retriever over the project's episodes, memories or entities returning
``NodeWithScore``s: the node's text is the hit's, its id the record's, its
metadata the hit's score, sources and ids (``nexus_grpc.integrations.search_results``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations import search_results
from nexus_grpc.integrations.adapter_client import AdapterClient, check_label
from nexus_grpc.integrations.chat_sessions import ConversationSession
from nexus_grpc.integrations.exchanges import Conversation, Role, Said, ToolCall, arguments_text

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.memory.memory import BaseMemoryBlock
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from pydantic import Field, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised by tests/e2e/frameworks' light install
    raise ImportError(
        "nexus_grpc.integrations.llamaindex needs LlamaIndex: pip install 'nexus-grpc[llamaindex]'"
    ) from exc

__all__ = ["NexusMemoryBlock", "NexusRetriever"]

log = logging.getLogger(__name__)

#: The most memories one selection returns (the server's search limit).
MAX_SELECTED = 100
# By the role's value, so that a role one LlamaIndex version lacks costs nothing.
_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}
# Blocks that are not what was said: a model's reasoning, a cache marker.
_NOT_SAID = frozenset({"thinking", "cache"})


def _prompt_text(message: ChatMessage) -> str:
    return message.content or ""


def _call(given: Any) -> ToolCall:
    """A tool call as an LLM integration puts it in ``additional_kwargs``: OpenAI's
    (``function.name``, ``function.arguments``), Anthropic's (``name``, ``input``)
    or Ollama's, as a dict or an object."""

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    function = get(given, "function")
    source = function if function is not None else given
    arguments: Any = next(
        (a for a in (get(source, k) for k in ("arguments", "input", "args")) if a is not None), {}
    )
    return ToolCall(
        str(get(source, "name") or "tool"), arguments_text(arguments), str(get(given, "id") or "")
    )


def _said(message: ChatMessage) -> Said:
    role = _ROLES.get(getattr(message.role, "value", str(message.role)), "system")
    parts: list[str] = []
    calls: list[ToolCall] = []
    # By block_type, not class: ToolCallBlock is newer than llama-index-core 0.14.0.
    blocks: list[Any] = list(message.blocks)
    for block in blocks:
        kind = getattr(block, "block_type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "tool_call":
            calls.append(
                ToolCall(
                    block.tool_name, arguments_text(block.tool_kwargs), block.tool_call_id or ""
                )
            )
        elif kind not in _NOT_SAID:
            parts.append(f"[{kind or type(block).__name__}]")
    extra = message.additional_kwargs
    # An integration may give a call both ways: once is enough.
    given = {c.id for c in calls if c.id}
    calls += [c for c in map(_call, extra.get("tool_calls") or ()) if not c.id or c.id not in given]
    return Said(
        role,
        "\n".join(parts),
        tuple(calls),
        tool=str(extra.get("name") or extra.get("tool_name") or ""),
        call_id=str(extra.get("tool_call_id") or ""),
        original=message,
    )


class NexusMemoryBlock(BaseMemoryBlock[str]):
    """A LlamaIndex memory block of the user's nexus memories; see the module."""

    name: str = Field(default="nexus_memories", description="The block's name in the prompt.")
    client: NexusClient | None = None
    target: str | None = None
    api_key: str | None = None
    client_options: dict[str, Any] | None = None
    project: str
    #: The user whose memories are selected, and whose conversation this is.
    user_id: str
    #: Narrows to one agent's memories, and is the conversation's agent.
    agent_id: str = ""
    #: The conversation's name; empty: the ``Memory``'s ``session_id``.
    session_id: str = ""
    limit: int = 10

    _conn: AdapterClient = PrivateAttr()
    _empty_reason: str | None = PrivateAttr(default=None)
    _conversations: dict[str, tuple[ConversationSession, Conversation]] = PrivateAttr(
        default_factory=dict
    )

    def model_post_init(self, context: Any, /) -> None:
        check_label("user_id", self.user_id)
        check_label("agent_id", self.agent_id, required=False)
        if self.session_id:
            check_label("session_id", self.session_id)
        if isinstance(self.limit, bool) or not 1 <= self.limit <= MAX_SELECTED:
            raise ValueError(f"limit must be from 1 to {MAX_SELECTED}; got {self.limit!r}")
        self._conn = AdapterClient(
            client=self.client,
            target=self.target,
            api_key=self.api_key,
            client_options=self.client_options,
            project=self.project,
            made_by="nexus-grpc's LlamaIndex memory block",
        )

    def _conversation(self, name: str) -> tuple[ConversationSession, Conversation]:
        name = self.session_id or name
        found = self._conversations.get(name)
        if found is None:
            session = ConversationSession(
                self._conn,
                name,
                user_id=self.user_id,
                agent_id=self.agent_id,
                source="nexus-grpc LlamaIndex memory block",
            )
            found = self._conversations[name] = (session, Conversation())
        return found

    async def _select(self, client: NexusClient, prompt: str, thread: str) -> str:
        scope = memory_pb2.MemoryScope(
            project_id=await self._conn.project_id(client),
            user_id=self.user_id,
            agent_id=self.agent_id,
        )
        stream = client.select_memories(
            prompt=prompt, scope=scope, thread_id=thread, limit=self.limit
        )
        lines = [f"- {selected.memory.content}" async for selected in stream]
        self._empty_reason = None if lines else stream.empty_reason
        if not lines:
            log.info(
                "NexusMemoryBlock selected no memory of user %r for the prompt: %s",
                self.user_id,
                stream.empty_reason or "the server said no reason",
            )
        return "\n".join(lines)

    @property
    def empty_reason(self) -> str | None:
        """Why the last ``aget`` that asked the server selected nothing, as the
        server said (``CODE: sentence``); None after one that selected memories,
        or before any."""
        return self._empty_reason

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        prompt = next(
            (_prompt_text(m) for m in reversed(messages or []) if m.role == MessageRole.USER), ""
        )
        if not prompt.strip():
            return ""
        thread = self.session_id or str(block_kwargs.get("session_id") or "")
        return await self._conn.call(lambda client: self._select(client, prompt, thread))

    async def _aput(self, messages: list[ChatMessage]) -> None:
        by_session: dict[str, list[Said]] = {}
        for message in messages:
            name = str(message.additional_kwargs.get("session_id") or "")
            if not (self.session_id or name):
                raise ValueError(
                    "NexusMemoryBlock needs a conversation name: set session_id, or use it in"
                    " a Memory (whose session_id it takes)"
                )
            by_session.setdefault(name, []).append(_said(message))
        for name, said in by_session.items():
            session, conversation = self._conversation(name)
            exchanges, pending = conversation.plan(said)
            await self._conn.call(lambda client: session.write(client, exchanges))  # noqa: B023
            conversation.commit(pending)

    async def aclose(self) -> None:
        await self._conn.aclose()


class NexusRetriever(BaseRetriever):
    """A LlamaIndex retriever over a nexus project's episodes, memories or entities."""

    def __init__(
        self,
        client: NexusClient | None = None,
        *,
        target: str | None = None,
        api_key: str | None = None,
        client_options: Mapping[str, Any] | None = None,
        project: str,
        kind: Literal["episodes", "memories", "entities"] = "memories",
        user_id: str = "",
        agent_id: str = "",
        include_archived: bool = False,
        mode: Literal["hybrid", "keyword", "semantic"] = "hybrid",
        similarity_top_k: int = 4,
        **kwargs: Any,
    ) -> None:
        search_results.check_search(kind, mode, similarity_top_k)
        self.kind = kind
        self.mode = mode
        self.similarity_top_k = similarity_top_k
        self.user_id = check_label("user_id", user_id, required=False)
        self.agent_id = check_label("agent_id", agent_id, required=False)
        self.include_archived = include_archived
        self._conn = AdapterClient(
            client=client,
            target=target,
            api_key=api_key,
            client_options=client_options,
            project=project,
            made_by="nexus-grpc's LlamaIndex retriever",
        )
        super().__init__(**kwargs)

    async def _search(self, client: NexusClient, query: str) -> list[NodeWithScore]:
        scope = search_results.Scope(
            project_id=await self._conn.project_id(client),
            user_id=self.user_id,
            agent_id=self.agent_id,
            include_archived=self.include_archived,
        )
        found = await search_results.search(
            client, self.kind, query, self.similarity_top_k, scope, self.mode
        )
        return [
            NodeWithScore(node=TextNode(id_=h.id, text=h.text, metadata=h.metadata), score=h.score)
            for h in found
        ]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._conn.run(lambda client: self._search(client, query_bundle.query_str))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await self._conn.call(lambda client: self._search(client, query_bundle.query_str))

    def close(self) -> None:
        self._conn.close()

    async def aclose(self) -> None:
        await self._conn.aclose()
