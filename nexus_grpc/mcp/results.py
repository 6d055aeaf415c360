"""What a tool answers: protobuf messages as JSON, and failures as MCP tool errors.

Every answer is one JSON object, sent twice over: as ``structuredContent``
(for clients that read data) and as its text (what a model reads).  A failure
is a tool result with ``isError`` set, whose text starts with the gRPC status
name (``NOT_FOUND: memory 7 does not exist``) and whose structured content is
``{"error": {"code", "message", "request_id"}}``: an agent can tell a bad
argument (INVALID_ARGUMENT: fix the call) from a dependency that is down
(UNAVAILABLE: try later) without parsing prose.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Sized
from typing import Any, TypeVar

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from mcp.types import CallToolResult, ContentBlock, TextContent

from nexus_grpc.client.base import NexusClientError
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2

__all__ = [
    "ToolFailure",
    "already_known",
    "answer",
    "checked",
    "entity",
    "episode",
    "failure",
    "memory",
    "relationship",
    "summary",
    "with_empty_reason",
]

TIERS = {
    memory_pb2.TIER_TASK: "task",
    memory_pb2.TIER_SESSION: "session",
    memory_pb2.TIER_LONGTERM: "longterm",
    memory_pb2.TIER_ARCHIVE: "archive",
}
KINDS = {memory_pb2.MEMORY_KIND_PROJECT: "project", memory_pb2.MEMORY_KIND_USER: "user"}
CATEGORIES = {
    memory_pb2.MEMORY_CATEGORY_NECESSARY: "necessary",
    memory_pb2.MEMORY_CATEGORY_SUPPORTING: "supporting",
}
SOURCES = {
    memory_pb2.SEARCH_SOURCE_KEYWORD: "keyword",
    memory_pb2.SEARCH_SOURCE_SEMANTIC: "semantic",
}
JOB_STATES = {
    memory_pb2.JOB_STATE_PENDING: "pending",
    memory_pb2.JOB_STATE_DONE: "done",
    memory_pb2.JOB_STATE_FAILED: "failed",
}


class ToolFailure(Exception):
    """A call refused or failed, with the gRPC status name that says why."""

    def __init__(self, code: str, message: str, request_id: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id

    @classmethod
    def from_client(cls, exc: NexusClientError) -> ToolFailure:
        return cls(exc.code.name, exc.message, exc.request_id)


T = TypeVar("T")

#: CreateMemory's trailer when it answered with a memory already there.
EXISTING_KEY = "x-nexus-existing"


def already_known(stored: Any) -> bool:
    """Whether a create answered with a memory that already held these words
    (the server stored nothing; x-nexus-existing)."""
    return EXISTING_KEY in getattr(stored, "trailers", {})


def with_empty_reason(answer: dict[str, Any], shown: Sized, reason: str | None) -> dict[str, Any]:
    """``answer``, with ``empty_reason`` when it shows nothing and the server
    said why (x-nexus-empty-reason: ``CODE: sentence``)."""
    if not len(shown) and reason:
        answer["empty_reason"] = reason
    return answer


async def checked(pending: Awaitable[T]) -> T:
    """The call's answer; a failed RPC as a ``ToolFailure`` with its status."""
    try:
        return await pending
    except NexusClientError as exc:
        raise ToolFailure.from_client(exc) from exc


def _text(payload: dict[str, Any]) -> list[ContentBlock]:
    return [TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))]


def answer(payload: dict[str, Any]) -> CallToolResult:
    """A successful tool result carrying ``payload``."""
    return CallToolResult(content=_text(payload), structured_content=payload)


def failure(exc: ToolFailure) -> CallToolResult:
    """The tool error an agent reads: the status name first, then the server's message."""
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.request_id:
        error["request_id"] = exc.request_id
    text = f"{exc.code}: {exc.message}"
    if exc.request_id:
        text += f" (request id {exc.request_id})"
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"error": error},
        is_error=True,
    )


def _time(message: Message, field: str) -> str | None:
    if not message.HasField(field):
        return None
    stamp: Timestamp = getattr(message, field)
    return stamp.ToJsonString()


def _label(m: memory_pb2.Memory, key: str) -> str | None:
    """A string the MCP server wrote into a memory's metadata (read without a full
    JSON conversion: this runs for every memory of every answer)."""
    value = m.metadata.fields.get(key)
    if value is None or value.WhichOneof("kind") != "string_value":
        return None
    return value.string_value


def memory(m: memory_pb2.Memory, *, session_id: int = 0) -> dict[str, Any]:
    """A memory; ``own_session`` says whether it was stored in the asking session.

    What an agent reads goes into its context window, so fields that say
    nothing are left out: ``confidence`` when it is 1, ``agent`` and ``user``
    when empty, ``update_time`` until the memory changes.
    """
    out: dict[str, Any] = {
        "id": m.id,
        "kind": KINDS.get(m.kind, "unspecified"),
        "tier": TIERS.get(m.tier, "unspecified"),
        "type": _label(m, "type") or "fact",
        "title": m.title,
        "content": m.content,
    }
    outcome = _label(m, "outcome")
    if outcome is not None:
        out["outcome"] = outcome
    out["own_session"] = bool(session_id) and m.session_id == session_id
    out["create_time"] = _time(m, "create_time")
    if m.update_time != m.create_time:
        out["update_time"] = _time(m, "update_time")
    if m.confidence != 1.0:
        out["confidence"] = round(m.confidence, 4)
    if m.agent_id:
        out["agent"] = m.agent_id
    if m.user_id:
        out["user"] = m.user_id
    if m.HasField("expire_time"):
        out["expire_time"] = _time(m, "expire_time")
    return out


def episode(e: memory_pb2.Episode) -> dict[str, Any]:
    return {
        "id": e.id,
        "session_id": e.session_id,
        "user_message": e.user_message,
        "ai_response": e.ai_response,
        "occur_time": _time(e, "occur_time"),
        "indexed": JOB_STATES.get(e.embedding_state, "pending"),
    }


def sources(values: Any) -> list[str]:
    return [SOURCES[s] for s in values if s in SOURCES]


def entity(e: graph_pb2.Entity) -> dict[str, Any]:
    return {
        "id": e.id,
        "name": e.name,
        "type": e.type,
        "notes": e.notes,
        "mention_count": e.mention_count,
        "last_seen_time": _time(e, "last_seen_time"),
    }


def relationship(r: graph_pb2.Relationship) -> dict[str, Any]:
    return {
        "id": r.id,
        "from_id": r.from_id,
        "to_id": r.to_id,
        "label": r.label,
        "notes": r.notes,
        "mention_count": r.mention_count,
    }


def summary(s: summary_pb2.Summary) -> dict[str, Any]:
    return {
        "id": s.id,
        "content": s.content,
        "first_episode_id": s.first_episode_id,
        "last_episode_id": s.last_episode_id,
        "episode_count": s.episode_count,
        "update_time": _time(s, "update_time") or _time(s, "create_time"),
    }


def category(value: int) -> str:
    return CATEGORIES.get(value, "unspecified")  # type: ignore[call-overload]
