"""The memory tools: the four that agents call by name, and what else an agent needs.

Each tool checks its arguments (``arguments``), resolves where it acts
(``workspace``), makes its gRPC calls through the typed client and answers
with JSON (``results``).  The visibility rules are the server's: every read
passes a ``MemoryScope`` naming the project, the agent session, ``--user``
and ``--agent``, so task and session memories reach only their own session
and longterm and archive ones every session of the project (session isolation for
several terminals on one project, README "Coding agents over MCP").

A list is complete or says it is not: searches report ``more_may_exist``
when they stopped at their limit, and ``memory_get_context`` gives each
group's total beside the ones it shows.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.mcp import arguments as a
from nexus_grpc.mcp import results as r
from nexus_grpc.mcp.results import ToolFailure
from nexus_grpc.mcp.workspace import AgentSession, Workspace

__all__ = ["MemoryTools", "ToolSpec"]

_PAGE = 1000
#: How many of each group memory_get_context shows (the totals are always given).
CONTEXT_SESSION_MEMORIES = 50
CONTEXT_LONGTERM_MEMORIES = 20
CONTEXT_EXCHANGES = 5
#: Selection asks a model twice: its deadline is the server's LLM time, not the client's 30 s.
SELECT_TIMEOUT = 300.0
SOURCE = "nexus-grpc mcp"


@dataclass(frozen=True)
class ToolSpec:
    """One tool as it is registered: its function and what the MCP listing says of it."""

    name: str
    fn: Callable[..., Awaitable[CallToolResult]]
    title: str
    annotations: ToolAnnotations


def _timestamp(value: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(value.astimezone(UTC))
    return stamp


class _ToolPlumbing:
    """What every tool stands on: the client, the workspace, the agent session
    a call acts in, its memory scope, and a failure answered as a tool error."""

    def __init__(
        self, client: NexusClient, workspace: Workspace, *, connection_session: str = ""
    ) -> None:
        self.client = client
        self.workspace = workspace
        self.connection_session = connection_session
        self._parameters: dict[str, frozenset[str]] = {}

    def parameters(self, tool: str) -> frozenset[str] | None:
        """The argument names ``tool`` takes; None for a tool that does not exist."""
        return self._parameters.get(tool)

    async def _run(self, work: Coroutine[Any, Any, dict[str, Any]]) -> CallToolResult:
        """Runs ``work`` and answers with its payload, or the failure as a tool error."""
        try:
            return r.answer(await work)
        except ToolFailure as exc:
            if exc.code in ("NOT_FOUND", "FAILED_PRECONDITION"):
                # A remembered session may be gone (deleted by hand): look again next time.
                self.workspace.forget_sessions()
            return r.failure(exc)

    def _agent_session(self, ctx: Context | None, given: str | None) -> str:
        """The agent session a call acts in: named by the call, else ``--session``,
        else this MCP connection's."""
        if given is not None:
            return a.session_name(given)
        if self.workspace.options.session:
            return self.workspace.options.session
        headers = ctx.headers if ctx is not None else None
        if headers:
            mcp_session = headers.get("mcp-session-id")
            if mcp_session:
                return mcp_session
        if self.connection_session:
            return self.connection_session
        raise a.bad(
            "session_id is required: this MCP connection has no session of its own"
            " (start nexus-grpc mcp with --session to set a default)"
        )

    async def _scope(self, session: AgentSession, *, archived: bool) -> memory_pb2.MemoryScope:
        options = self.workspace.options
        return memory_pb2.MemoryScope(
            project_id=await self.workspace.project_id(),
            user_id=options.user,
            session_id=session.id,
            agent_id=options.agent,
            include_archived=archived,
        )

    async def _create_memory(
        self, session: AgentSession, tier: str, title: str, content: str, metadata: dict[str, Any]
    ) -> memory_pb2.Memory:
        memory = memory_pb2.Memory(
            kind=memory_pb2.MEMORY_KIND_PROJECT,
            title=title,
            content=content,
            tier=a.TIER_VALUES[tier],
            project_id=await self.workspace.project_id(),
            agent_id=self.workspace.options.agent,
            session_id=session.id,
        )
        memory.metadata.update({**metadata, "source": SOURCE, "agent_session_id": session.name})
        return await r.checked(self.client.create_memory(memory=memory))

    async def _visible_memories(
        self, scope: memory_pb2.MemoryScope
    ) -> tuple[list[memory_pb2.Memory], str | None]:
        """Every memory ``scope`` sees (at most the per-agent cap and the user's),
        oldest first, and, when it sees none, why (the server's empty reason)."""
        out: list[memory_pb2.Memory] = []
        token = ""
        reason: str | None = None
        while True:
            page = await r.checked(
                self.client.list_memories(scope=scope, page_size=_PAGE, page_token=token)
            )
            if not token:
                reason = getattr(page, "empty_reason", None)  # the view of the answer
            out += page.memories
            token = page.next_page_token
            if not token:
                return out, reason

    async def _summary_parts(self, session_id: int) -> list[Any]:
        parts: list[Any] = []
        token = ""
        while True:
            page = await r.checked(
                self.client.list_summaries(session_id=session_id, page_size=_PAGE, page_token=token)
            )
            parts += page.summaries
            token = page.next_page_token
            if not token:
                return parts


class _MemoryNoteTools(_ToolPlumbing):
    """The tools that write, find, select and forget memories."""

    async def memory_add_fact(
        self,
        content: a.Content,
        tier: a.WriteTier = "session",
        session_id: a.AgentSessionId = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Remember a fact: something true about the project, the code or the task.

        task and session facts are seen only by this session (session
        isolation: another terminal on the project never sees them); longterm
        facts by every session of the project ("the database runs on port
        5433"); archive facts are kept for reference and returned only when
        asked for by tier. Returns the stored memory with its id.
        """

        async def work() -> dict[str, Any]:
            a.not_blank("content", content)
            name = self._agent_session(ctx, session_id)
            session = await self.workspace.open_session(name)
            stored = await self._create_memory(
                session, tier, a.title_of(content), content, {"type": "fact"}
            )
            return {
                "memory": r.memory(stored, session_id=session.id),
                # Told twice (a retried call): the memory already there, nothing stored.
                "already_known": r.already_known(stored),
                "session_id": name,
            }

        return await self._run(work())

    async def memory_add_experience(
        self,
        content: a.Content,
        outcome: a.Outcome,
        session_id: a.AgentSessionId = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Remember an experience: what was tried and how it turned out, to learn from.

        Stored in the session tier (seen only by this session) with its
        outcome; memory_query and memory_get_context return it with
        ``type: "experience"`` and its ``outcome``. Returns the stored memory.
        """

        async def work() -> dict[str, Any]:
            a.not_blank("content", content)
            a.not_blank("outcome", outcome)
            text = f"{content}\n\nOutcome: {outcome}"
            if len(text) > a.MAX_MESSAGE_CHARS:
                raise a.bad(
                    f"content and outcome together are {len(text)} characters; the limit is"
                    f" {a.MAX_MESSAGE_CHARS}"
                )
            name = self._agent_session(ctx, session_id)
            session = await self.workspace.open_session(name)
            stored = await self._create_memory(
                session,
                "session",
                a.title_of(content),
                text,
                {"type": "experience", "outcome": outcome},
            )
            return {
                "memory": r.memory(stored, session_id=session.id),
                "already_known": r.already_known(stored),
                "session_id": name,
            }

        return await self._run(work())

    async def memory_query(
        self,
        query: a.QueryText,
        tier: a.ReadTier = None,
        session_id: a.AgentSessionId = None,
        limit: a.Limit = 10,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Search the memories this session may see, best match first.

        Sees this session's task and session memories, the project's longterm
        ones and, with --user, that user's; never another session's task or
        session memories. ``tier`` narrows to one tier (archive only this
        way). An empty query lists the newest memories instead of searching.
        ``more_may_exist`` is true when the answer stopped at ``limit``.
        """

        async def work() -> dict[str, Any]:
            name = self._agent_session(ctx, session_id)
            session = await self.workspace.find_session(name)
            scope = await self._scope(session, archived=tier == "archive")
            wanted = a.TIER_VALUES[tier] if tier else None
            if not query.strip():
                visible, why = await self._visible_memories(scope)
                memories = [m for m in visible if wanted is None or m.tier == wanted]
                memories.reverse()  # newest first
                shown = memories[:limit]
                return r.with_empty_reason(
                    {
                        "memories": [r.memory(m, session_id=session.id) for m in shown],
                        "count": len(shown),
                        "total": len(memories),
                        "more_may_exist": len(memories) > limit,
                        "session_id": name,
                    },
                    shown,
                    why if not visible else None,
                )
            # The server has no tier filter: with one, read the widest page and
            # filter it, and say so when that page may have left some out.
            fetch = limit if wanted is None else a.MAX_SEARCH_LIMIT
            stream = self.client.search_memories(query=query, scope=scope, limit=fetch)
            hits = await r.checked(stream.collect())
            matching = [h for h in hits if wanted is None or h.memory.tier == wanted]
            shown_hits = matching[:limit]
            return r.with_empty_reason(
                {
                    "memories": [
                        {**r.memory(h.memory, session_id=session.id), "score": round(h.score, 4)}
                        for h in shown_hits
                    ],
                    "count": len(shown_hits),
                    "more_may_exist": len(hits) >= fetch or len(matching) > limit,
                    "session_id": name,
                },
                shown_hits,
                stream.empty_reason,
            )

        return await self._run(work())

    async def memory_get_context(
        self, session_id: a.AgentSessionId = None, ctx: Context | None = None
    ) -> CallToolResult:
        """What this session should know now: call it when a session starts or resumes.

        Returns this session's task and session memories (newest 50 of each),
        the project's newest 20 longterm memories, the session's latest
        summary and its last 5 exchanges. Each group comes with its total, so
        nothing is left out silently: memory_query finds the rest.
        """

        async def work() -> dict[str, Any]:
            name = self._agent_session(ctx, session_id)
            session = await self.workspace.find_session(name)
            scope = await self._scope(session, archived=False)
            visible, why = await self._visible_memories(scope)
            visible.reverse()  # newest first
            groups: dict[str, Any] = {}
            for tier, shown in (
                ("task", CONTEXT_SESSION_MEMORIES),
                ("session", CONTEXT_SESSION_MEMORIES),
                ("longterm", CONTEXT_LONGTERM_MEMORIES),
            ):
                members = [m for m in visible if m.tier == a.TIER_VALUES[tier]]
                groups[tier] = {
                    "memories": [r.memory(m, session_id=session.id) for m in members[:shown]],
                    "total": len(members),
                    "more_may_exist": len(members) > shown,
                }
            out: dict[str, Any] = {
                "session_id": name,
                "project": self.workspace.project,
                "session_exists": bool(session.id),
                "memories": groups,
                "summary": None,
                "recent_exchanges": [],
                "more_exchanges": False,
            }
            if session.id:
                parts = await self._summary_parts(session.id)
                out["summary"] = r.summary(parts[-1]) if parts else None
                page = await r.checked(
                    self.client.list_episodes(session_id=session.id, page_size=CONTEXT_EXCHANGES)
                )
                out["recent_exchanges"] = [r.episode(e) for e in page.episodes]
                out["more_exchanges"] = bool(page.next_page_token)
            return r.with_empty_reason(out, visible, why)

        return await self._run(work())

    async def memory_select(
        self,
        prompt: a.Prompt,
        session_id: a.AgentSessionId = None,
        limit: a.Limit = 10,
        thread_summary: a.ThreadSummary = "",
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Select the memories a prompt needs, ranked (SelectMemories' two passes).

        A fast model picks relevant memories from their titles, then ranks
        them; each comes with a relevance (0-1), a category (necessary or
        supporting) and whether this session already used it. Without a
        model the server ranks by meaning and says so in ``method`` and
        ``degraded_reason``. Records which memories this session used.
        """

        async def work() -> dict[str, Any]:
            a.not_blank("prompt", prompt)
            name = self._agent_session(ctx, session_id)
            session = await self.workspace.find_session(name)
            stream = self.client.select_memories(
                prompt=prompt,
                scope=await self._scope(session, archived=False),
                # The agent session is the thread: what it already used ranks lower.
                thread_id=session.external_id,
                thread_summary=thread_summary,
                limit=limit,
                timeout=SELECT_TIMEOUT,
            )
            selected = await r.checked(stream.collect())
            answer = {
                "memories": [
                    {
                        **r.memory(s.memory, session_id=session.id),
                        "relevance": round(s.relevance, 4),
                        "category": r.category(s.category),
                        "previously_used": s.previously_used,
                    }
                    for s in selected
                ],
                "count": len(selected),
                "more_may_exist": len(selected) >= limit,
                # Said by the server also when nothing was selected.
                "method": stream.selection_method or (selected[0].method if selected else ""),
                "degraded_reason": selected[0].degraded_reason if selected else "",
                "session_id": name,
            }
            return r.with_empty_reason(answer, selected, stream.empty_reason)

        return await self._run(work())

    async def memory_forget(
        self, memory_id: a.MemoryId, session_id: a.AgentSessionId = None, ctx: Context | None = None
    ) -> CallToolResult:
        """Forget a memory this session can see (its id from memory_query).

        It is deleted at once: no search, query or selection returns it again
        (the server keeps its history for its owner for a while). Another
        session's task or session memory cannot be forgotten from here.
        """

        async def work() -> dict[str, Any]:
            name = self._agent_session(ctx, session_id)
            session = await self.workspace.find_session(name)
            project_id = await self.workspace.project_id()
            options = self.workspace.options
            memory = await r.checked(
                self.client.get_memory(id=memory_id, user_id=options.user, session_id=session.id)
            )
            in_project = memory.project_id == project_id or (
                memory.kind == memory_pb2.MEMORY_KIND_USER and memory.project_id == 0
            )
            if not in_project or (options.agent and memory.agent_id != options.agent):
                raise ToolFailure(
                    "NOT_FOUND",
                    f"memory {memory_id} is not one this session of project"
                    f" {self.workspace.project!r} can see",
                )
            await r.checked(
                self.client.delete_memory(id=memory_id, user_id=options.user, session_id=session.id)
            )
            return {"forgotten": r.memory(memory, session_id=session.id), "session_id": name}

        return await self._run(work())


class _ConversationTools(_ToolPlumbing):
    """The tools over the conversation itself: its exchanges and its summary."""

    async def memory_add_exchange(
        self,
        user_message: a.UserMessage,
        ai_response: a.AiResponse = "",
        session_id: a.AgentSessionId = None,
        occur_time: a.Time = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Record one exchange of the conversation: the user's message and your answer.

        Stored durably in this session (shared with the project's other
        sessions for memory_search_conversation), then indexed, summarised and
        mined for entities in the background. ``occur_time``: when it happened,
        for an exchange recorded after the fact (default now). Returns the
        episode with its id.
        """

        async def work() -> dict[str, Any]:
            a.not_blank("user_message", user_message)
            a.past_or_now("occur_time", occur_time)
            name = self._agent_session(ctx, session_id)
            session = await self.workspace.open_session(name)
            episode = await r.checked(
                self.client.create_episode(
                    session_id=session.id,
                    user_message=user_message,
                    ai_response=ai_response,
                    metadata={"source": SOURCE},
                    occur_time=_timestamp(occur_time) if occur_time else None,
                )
            )
            return {"exchange": r.episode(episode), "session_id": name}

        return await self._run(work())

    async def memory_search_conversation(
        self,
        query: a.QueryText,
        mode: a.Mode = "hybrid",
        start_time: a.Time = None,
        end_time: a.Time = None,
        limit: a.Limit = 10,
    ) -> CallToolResult:
        """Search the project's recorded exchanges (every session's), best match first.

        ``start_time``/``end_time`` keep exchanges that happened in
        [start_time, end_time); either may be omitted. Each hit has a snippet
        with the matched words in [brackets] and the whole exchange.
        ``more_may_exist`` is true when the answer stopped at ``limit``.
        """

        async def work() -> dict[str, Any]:
            a.not_blank("query", query)
            a.window(start_time, end_time)
            stream = self.client.search_episodes(
                query=query,
                project_id=await self.workspace.project_id(),
                limit=limit,
                mode=a.MODE_VALUES[mode],
                start_time=_timestamp(start_time) if start_time else None,
                end_time=_timestamp(end_time) if end_time else None,
            )
            hits = await r.checked(stream.collect())
            answer = {
                "hits": [
                    {
                        "score": round(h.score, 4),
                        "snippet": h.snippet,
                        "sources": r.sources(h.sources),
                        "exchange": r.episode(h.episode),
                    }
                    for h in hits
                ],
                "count": len(hits),
                "more_may_exist": len(hits) >= limit,
            }
            return r.with_empty_reason(answer, hits, stream.empty_reason)

        return await self._run(work())

    async def memory_get_summary(
        self, session_id: a.AgentSessionId = None, ctx: Context | None = None
    ) -> CallToolResult:
        """Read this session's summary, which the server writes in the background as
        exchanges accumulate (every part, oldest first: a long session's summary
        continues in a new part once one is full). Empty until the first is written."""

        async def work() -> dict[str, Any]:
            name = self._agent_session(ctx, session_id)
            session = await self.workspace.find_session(name)
            parts = await self._summary_parts(session.id) if session.id else []
            return {
                "session_id": name,
                "parts": [r.summary(p) for p in parts],
                "count": len(parts),
            }

        return await self._run(work())


class _GraphTools(_ToolPlumbing):
    """The tools over the knowledge graph: entities and their neighbourhoods."""

    async def memory_search_entities(
        self, query: a.QueryText, limit: a.Limit = 10
    ) -> CallToolResult:
        """Search the project's knowledge graph for entities (people, places, projects,
        technologies, concepts, organisations) by name and meaning.

        The graph is built in the background from recorded exchanges. Use an
        entity's id with memory_get_neighborhood.
        """

        async def work() -> dict[str, Any]:
            a.not_blank("query", query)
            stream = self.client.search_entities(
                query=query, project_id=await self.workspace.project_id(), limit=limit
            )
            hits = await r.checked(stream.collect())
            answer = {
                "entities": [{**r.entity(h.entity), "score": round(h.score, 4)} for h in hits],
                "count": len(hits),
                "more_may_exist": len(hits) >= limit,
            }
            return r.with_empty_reason(answer, hits, stream.empty_reason)

        return await self._run(work())

    async def memory_get_neighborhood(
        self, entity_id: a.EntityId, depth: a.Depth = 1
    ) -> CallToolResult:
        """Read an entity's neighbourhood in the project's graph: the entities within
        ``depth`` hops (either direction) and every relationship between them."""

        async def work() -> dict[str, Any]:
            project_id = await self.workspace.project_id()
            entity = await r.checked(self.client.get_entity(id=entity_id))
            if entity.project_id != project_id:
                # Another project's entity is as absent as one that does not exist.
                raise ToolFailure(
                    "NOT_FOUND", f"entity {entity_id} is not in project {self.workspace.project!r}"
                )
            graph = await r.checked(self.client.get_neighborhood(entity_id=entity_id, depth=depth))
            names = {n.id: n.name for n in graph.nodes}
            return {
                "entity": r.entity(entity),
                "depth": depth,
                "entities": [r.entity(n) for n in graph.nodes],
                "relationships": [
                    {**r.relationship(e), "from": names.get(e.from_id), "to": names.get(e.to_id)}
                    for e in graph.edges
                ],
            }

        return await self._run(work())


class MemoryTools(_MemoryNoteTools, _ConversationTools, _GraphTools):
    """The tools over one client and workspace.

    ``connection_session`` is the agent session of a stdio connection that
    names none: the process serves one client, so its lifetime is that
    client's MCP session.  Over HTTP the client's ``Mcp-Session-Id`` plays
    that part where the protocol version has one.
    """

    def specs(self) -> list[ToolSpec]:
        read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
        write = ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        )
        specs = [
            ToolSpec("memory_add_fact", self.memory_add_fact, "Remember a fact", write),
            ToolSpec(
                "memory_add_experience",
                self.memory_add_experience,
                "Remember an experience",
                write,
            ),
            ToolSpec("memory_query", self.memory_query, "Search memories", read),
            ToolSpec("memory_get_context", self.memory_get_context, "Session context", read),
            ToolSpec("memory_add_exchange", self.memory_add_exchange, "Record an exchange", write),
            ToolSpec(
                "memory_search_conversation",
                self.memory_search_conversation,
                "Search the conversation",
                read,
            ),
            # Selection records which memories were used in the thread (the
            # usage log): not read-only, though it changes no memory.
            ToolSpec(
                "memory_select",
                self.memory_select,
                "Select memories for a prompt",
                ToolAnnotations(
                    read_only_hint=False, destructive_hint=False, open_world_hint=False
                ),
            ),
            ToolSpec(
                "memory_search_entities", self.memory_search_entities, "Search entities", read
            ),
            ToolSpec(
                "memory_get_neighborhood",
                self.memory_get_neighborhood,
                "Read an entity's neighbourhood",
                read,
            ),
            ToolSpec("memory_get_summary", self.memory_get_summary, "Session summary", read),
            ToolSpec(
                "memory_forget",
                self.memory_forget,
                "Forget a memory",
                ToolAnnotations(
                    read_only_hint=False,
                    destructive_hint=True,
                    idempotent_hint=False,
                    open_world_hint=False,
                ),
            ),
        ]
        for spec in specs:
            names = inspect.signature(spec.fn).parameters
            self._parameters[spec.name] = frozenset(n for n in names if n != "ctx")
        return specs


def connection_session_id() -> str:
    """A fresh agent session id for one stdio connection."""
    return str(uuid.uuid4())
