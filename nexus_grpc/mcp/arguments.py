"""The tools' arguments: their JSON schemas, and the checks made before any call.

The types below become each tool's input schema (the SDK derives it with
pydantic), so an agent sees the bounds, the allowed values and what each
argument means; a value outside them is refused by the SDK before the tool
runs.  What a schema cannot say (blank text, control characters in a
session id, a window whose start is not before its end, text too long once
combined) is checked by the functions at the end, which raise
INVALID_ARGUMENT.  Either way no gRPC call is made, so a refused call writes
nothing.

The limits mirror the server's (``domain/validation.py``, which this
client-side package may not import): a call the server would refuse is
refused here first, before a session is opened for it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from pydantic import AwareDatetime, Field

from nexus_grpc.control_chars import CONTROL_CHARS, escape_controls
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.mcp.results import ToolFailure

__all__ = [
    "AgentSessionId",
    "AiResponse",
    "Content",
    "Depth",
    "EntityId",
    "Limit",
    "MemoryId",
    "Mode",
    "Outcome",
    "Prompt",
    "QueryText",
    "ReadTier",
    "ThreadSummary",
    "Time",
    "UserMessage",
    "WriteTier",
]

MAX_MESSAGE_CHARS = 100_000
MAX_SHORT_TEXT_CHARS = 10_000
MAX_QUERY_CHARS = 2_000
MAX_ID_CHARS = 200
MAX_SEARCH_LIMIT = 100
MAX_DEPTH = 3
#: How far ahead of this clock an exchange's occur_time may be (the server's rule).
MAX_CLOCK_SKEW = timedelta(minutes=5)

TIER_VALUES = {
    "task": memory_pb2.TIER_TASK,
    "session": memory_pb2.TIER_SESSION,
    "longterm": memory_pb2.TIER_LONGTERM,
    "archive": memory_pb2.TIER_ARCHIVE,
}
MODE_VALUES = {
    "hybrid": memory_pb2.SEARCH_MODE_HYBRID,
    "keyword": memory_pb2.SEARCH_MODE_KEYWORD,
    "semantic": memory_pb2.SEARCH_MODE_SEMANTIC,
}

_TIERS_TEXT = (
    "task: this task only, seen by this session alone; session: what this session learnt,"
    " seen by this session alone; longterm: shared with every session of the project;"
    " archive: shared, historical, returned only when asked for by tier"
)

WriteTier = Annotated[
    Literal["task", "session", "longterm", "archive"],
    Field(description=f"Where the memory lives. {_TIERS_TEXT}."),
]
ReadTier = Annotated[
    Literal["task", "session", "longterm", "archive"] | None,
    Field(
        description="Only memories of this tier (task and session: this session's own). Omitted:"
        " every tier this session sees except archive."
    ),
]
AgentSessionId = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="Your agent session's id (e.g. Claude Code's session id, or any stable name"
        " for this terminal's work). task and session memories are seen only by the session"
        " that stored them. Omitted: the server's --session, else this MCP connection's own"
        " session.",
    ),
]
Content = Annotated[
    str,
    Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="The memory's text."),
]
UserMessage = Annotated[
    str,
    Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="What the user said."),
]
AiResponse = Annotated[
    str, Field(max_length=MAX_MESSAGE_CHARS, description="What you answered (may be empty).")
]
Prompt = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_SHORT_TEXT_CHARS,
        description="The prompt the memories are for: the user's request as you will act on it.",
    ),
]
ThreadSummary = Annotated[
    str,
    Field(
        max_length=MAX_SHORT_TEXT_CHARS,
        description="Optional: a few lines on the conversation so far, to rank by.",
    ),
]
Outcome = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_SHORT_TEXT_CHARS,
        description="What happened as a result: whether it worked, and what to do next time.",
    ),
]
QueryText = Annotated[
    str,
    Field(
        max_length=MAX_QUERY_CHARS,
        description="What to look for, in words (keyword and semantic search, fused).",
    ),
]
Limit = Annotated[
    int, Field(ge=1, le=MAX_SEARCH_LIMIT, description="The most results to return (1-100).")
]
Mode = Annotated[
    Literal["hybrid", "keyword", "semantic"],
    Field(
        description="hybrid (default): keywords and meaning fused; keyword: exact words"
        " (bm25); semantic: meaning only."
    ),
]
MemoryId = Annotated[int, Field(ge=1, description="The memory's id, as memory_query returns it.")]
EntityId = Annotated[
    int, Field(ge=1, description="The entity's id, as memory_search_entities returns it.")
]
Depth = Annotated[int, Field(ge=1, le=MAX_DEPTH, description="How many hops to walk, 1 to 3.")]
Time = Annotated[
    AwareDatetime | None,
    Field(description="An RFC 3339 time with its offset, e.g. 2025-03-01T09:00:00Z."),
]


def bad(message: str) -> ToolFailure:
    return ToolFailure("INVALID_ARGUMENT", message)


def not_blank(field: str, value: str) -> str:
    """Text that shows something: not only spaces or invisible characters."""
    if not any(c.isprintable() and not c.isspace() for c in value):
        raise bad(f"{field} is required and must not be blank")
    if "\x00" in value:
        raise bad(f"{field} must not contain NUL characters")
    return value


def session_name(value: str) -> str:
    """An agent session id: an identifier, as the server checks its ids."""
    found = CONTROL_CHARS.search(value)
    if found:
        raise bad(
            f"session_id must not contain control characters; found"
            f" {escape_controls(found.group())} at position {found.start()}"
        )
    if not value.strip():
        raise bad("session_id must not be blank")
    if value != value.strip():
        raise bad("session_id must not start or end with whitespace")
    return value


def window(start: datetime | None, end: datetime | None) -> None:
    if start is not None and end is not None and start >= end:
        raise bad(
            f"start_time ({start.isoformat()}) must be earlier than end_time ({end.isoformat()})"
        )


def past_or_now(field: str, value: datetime | None) -> None:
    if value is not None and value > datetime.now(UTC) + MAX_CLOCK_SKEW:
        raise bad(
            f"{field} ({value.isoformat()}) is in the future: an exchange is stored when it"
            " happened, at most 5 minutes ahead of now"
        )


def title_of(content: str, limit: int = 120) -> str:
    """A memory's title: its first line that shows something, on one line, cut with an ellipsis.

    Selection (SelectMemories) reads titles, not contents, so the title is the
    memory's own opening words, never a generic label.
    """
    for line in content.splitlines():
        clean = " ".join(CONTROL_CHARS.sub(" ", line).split())
        if clean:
            return clean if len(clean) <= limit else clean[: limit - 1].rstrip() + "…"
    return "memory"
