"""The MCP tools' arguments (mcp/arguments.py), without the SDK's transport or a
server: the bounds their schemas give (checked here by pydantic, as the SDK checks
them), the checks a schema cannot make (blank or invisible text, control characters
in a session id, a window, a time in the future) and a memory's title.

(Every tool refusing bad arguments through ``nexus-grpc mcp`` itself, before any
call: tests/e2e/mcp/test_mcp_agents.py's BAD_CALLS.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import TypeAdapter, ValidationError

from nexus_grpc.mcp import arguments
from nexus_grpc.mcp.results import ToolFailure


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (arguments.Limit, 0),
        (arguments.Limit, 101),
        (arguments.Limit, "many"),
        (arguments.WriteTier, "forever"),
        (arguments.ReadTier, "TASK"),
        (arguments.Mode, "fuzzy"),
        (arguments.Content, ""),
        (arguments.Content, "x" * 100_001),
        (arguments.Content, ["not", "text"]),
        (arguments.QueryText, "x" * 2_001),
        (arguments.Prompt, ""),
        (arguments.Prompt, "x" * 10_001),
        (arguments.ThreadSummary, "y" * 10_001),
        (arguments.Outcome, ""),
        (arguments.AgentSessionId, ""),
        (arguments.AgentSessionId, "s" * 201),
        (arguments.EntityId, 0),
        (arguments.Depth, 4),
        (arguments.MemoryId, -3),
        (arguments.MemoryId, "seven"),
        (arguments.Time, "2024-05-01T09:00:00"),  # no offset
        (arguments.Time, "yesterday"),
    ],
)
def test_a_value_outside_its_schema_is_refused(kind, value):
    with pytest.raises(ValidationError):
        TypeAdapter(kind).validate_python(value)


def test_the_bounds_themselves_pass():
    assert TypeAdapter(arguments.Limit).validate_python(100) == 100
    assert TypeAdapter(arguments.Depth).validate_python(3) == 3
    assert TypeAdapter(arguments.AgentSessionId).validate_python(None) is None
    assert TypeAdapter(arguments.Content).validate_python("x" * 100_000)
    assert TypeAdapter(arguments.Time).validate_python("2024-05-01T09:00:00Z") == datetime(
        2024, 5, 1, 9, tzinfo=UTC
    )


def refusal(check, *args) -> str:
    with pytest.raises(ToolFailure) as info:
        check(*args)
    assert info.value.code == "INVALID_ARGUMENT"
    return info.value.message


@pytest.mark.parametrize("text", ["  \n\t ", " ", "\u200b", ""])
def test_text_that_shows_nothing_is_refused(text):
    assert refusal(arguments.not_blank, "query", text) == "query is required and must not be blank"


def test_text_with_a_nul_is_refused_and_text_that_shows_something_passes():
    assert refusal(arguments.not_blank, "content", "a\x00b") == (
        "content must not contain NUL characters"
    )
    assert arguments.not_blank("content", " x ") == " x "


def test_a_session_id_is_an_identifier():
    assert refusal(arguments.session_name, "a\x1b[2Jb") == (
        "session_id must not contain control characters; found \\x1b at position 1"
    )
    assert "control characters" in refusal(arguments.session_name, "\n")
    assert refusal(arguments.session_name, " padded") == (
        "session_id must not start or end with whitespace"
    )
    assert arguments.session_name("terminal-1") == "terminal-1"


def test_a_window_starts_before_it_ends():
    start, end = datetime(2024, 5, 2, tzinfo=UTC), datetime(2024, 5, 1, tzinfo=UTC)
    assert "must be earlier than end_time" in refusal(arguments.window, start, end)
    assert "must be earlier than end_time" in refusal(arguments.window, start, start)
    arguments.window(end, start)
    arguments.window(None, end)


def test_an_exchange_happened_at_most_five_minutes_ahead_of_now():
    ahead = datetime.now(UTC) + timedelta(days=1)
    assert "is in the future" in refusal(arguments.past_or_now, "occur_time", ahead)
    arguments.past_or_now("occur_time", datetime.now(UTC) + timedelta(minutes=4))
    arguments.past_or_now("occur_time", None)


def test_a_memorys_title_is_its_first_line_that_shows_something():
    assert arguments.title_of("\n  \n  Deploys   go\tout \x07 blue-green\nsecond") == (
        "Deploys go out blue-green"
    )
    assert arguments.title_of("x" * 130, limit=10) == "xxxxxxxxx…"
    assert arguments.title_of(" \n\t") == "memory"
