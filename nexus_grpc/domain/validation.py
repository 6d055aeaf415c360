"""Input checks shared by every use case.

Each failure names the field and the problem, so a client can fix its call
without reading server logs: in the message for people, and as the
InvalidArgument's ``field`` (a BadRequest field violation on the wire) for
programs. ``field`` is the caller's path to the value, in the proto's names
(``memory.title``, ``scope.user_id``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from nexus_grpc.control_chars import CONTROL_CHARS, escape_controls
from nexus_grpc.core.models import TimeWindow
from nexus_grpc.errors import FieldViolation, InvalidArgument

# Per-field caps.  They bound what one call can make the server hold, embed or
# send to the LLM; the gRPC message cap bounds the whole request.
MAX_NAME_CHARS = 200
MAX_ID_CHARS = 200
MAX_SHORT_TEXT_CHARS = 10_000
MAX_MESSAGE_CHARS = 100_000
MAX_QUERY_CHARS = 2_000
MAX_METADATA_BYTES = 64_000
MAX_SEARCH_LIMIT = 100
DEFAULT_SEARCH_LIMIT = 10
# How much of a rejected value an error message quotes.  A status message
# travels in a trailer that peers cap (16 KiB by default in grpc): quoting a
# whole 100 kB value would turn INVALID_ARGUMENT into a RESOURCE_EXHAUSTED
# "stream removed" that says nothing about the mistake.
MAX_QUOTED_CHARS = 80
# How far ahead of this server's clock an occur_time may be: a client's clock
# may run a little fast, but an exchange cannot have happened in the future.
MAX_CLOCK_SKEW_SECONDS = 300.0


def quoted(value: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """``value`` for an error message: repr'd, and cut with a note past ``limit``."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


def _visible(value: str) -> bool:
    # Zero-width and other format characters (U+200B, U+FEFF) are not
    # whitespace to str.strip(), but a name made only of them shows nothing.
    return any(c.isprintable() and not c.isspace() for c in value)


def text(field: str, value: str, *, limit: int, required: bool = False) -> str:
    if required and not _visible(value):
        raise InvalidArgument(f"{field} is required and must not be blank", field=field)
    if len(value) > limit:
        raise InvalidArgument(
            f"{field} is {len(value)} characters; the limit is {limit}", field=field
        )
    if "\x00" in value:
        raise InvalidArgument(f"{field} must not contain NUL characters", field=field)
    return value


def name(field: str, value: str, *, limit: int = MAX_NAME_CHARS, required: bool = False) -> str:
    """A one-line label people read in lists, consoles and logs (a name, a
    title): it must not carry control characters that could forge a line or
    repaint the screen of whoever reads it."""
    text(field, value, limit=limit, required=required)
    found = CONTROL_CHARS.search(value)
    if found:
        raise InvalidArgument(
            f"{field} must not contain control characters; found"
            f" {escape_controls(found.group())} at position {found.start()}",
            field=field,
        )
    return value


def identifier(field: str, value: str) -> str:
    """A caller-chosen id (user, agent, thread, request).  Surrounding spaces
    are refused rather than stripped: "bob " and "bob" must not be two users
    to one check and one user to another."""
    name(field, value, limit=MAX_ID_CHARS)
    if value != value.strip():
        raise InvalidArgument(f"{field} must not start or end with whitespace", field=field)
    return value


def positive_id(field: str, value: int, *, required: bool = True) -> int:
    if value < 0 or (required and value == 0):
        raise InvalidArgument(f"{field} must be a positive id, got {value}", field=field)
    return value


#: The largest count a store keeps (PostgreSQL's INTEGER columns: episode_count,
#: use_count, mention_count); a larger one is refused here, not by the database.
MAX_COUNT = 2**31 - 1


def count(field: str, value: int) -> int:
    if not 0 <= value <= MAX_COUNT:
        raise InvalidArgument(
            f"{field} must be a count from 0 to {MAX_COUNT}, got {value}", field=field
        )
    return value


def metadata(field: str, value: Mapping[str, Any]) -> dict[str, Any]:
    encoded = json.dumps(value)
    if len(encoded) > MAX_METADATA_BYTES:
        raise InvalidArgument(
            f"{field} is {len(encoded)} bytes as JSON; the limit is {MAX_METADATA_BYTES}",
            field=field,
        )
    return dict(value)


def external_id(value: str) -> str:
    if not value:
        return str(uuid.uuid4())
    try:
        return str(uuid.UUID(value))
    except ValueError as exc:
        raise InvalidArgument(
            f"external_id must be a UUID, got {quoted(value)}", field="external_id"
        ) from exc


def search_limit(value: int) -> int:
    if value < 0:
        raise InvalidArgument(f"limit must not be negative, got {value}", field="limit")
    if value > MAX_SEARCH_LIMIT:
        raise InvalidArgument(f"limit is {value}; the maximum is {MAX_SEARCH_LIMIT}", field="limit")
    return value or DEFAULT_SEARCH_LIMIT


def query(value: str) -> str:
    text("query", value, limit=MAX_QUERY_CHARS)
    if not value.strip():
        raise InvalidArgument("query is required and must not be blank", field="query")
    return value.strip()


def update_mask(paths: list[str], allowed: tuple[str, ...]) -> list[str]:
    if not paths:
        raise InvalidArgument(
            f"update_mask must name at least one of: {', '.join(allowed)}", field="update_mask"
        )
    unknown = [p for p in paths if p not in allowed]
    if unknown:
        shown = ", ".join(quoted(p, 40) for p in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise InvalidArgument(
            f"update_mask names fields that cannot be updated: {shown}{more}"
            f" (allowed: {', '.join(allowed)})",
            field="update_mask",
        )
    return list(dict.fromkeys(paths))


def occur_time(field: str, value: float | None) -> float | None:
    """When an exchange happened; None (unset) means now."""
    if value is not None and value > time.time() + MAX_CLOCK_SKEW_SECONDS:
        raise InvalidArgument(
            f"{field} is in the future; an exchange must have happened already", field=field
        )
    return value


def time_window(window: TimeWindow | None) -> TimeWindow | None:
    """A search's [start_time, end_time) window; None when it bounds nothing."""
    if window is None or window.empty:
        return None
    if window.start is not None and window.end is not None and window.start >= window.end:
        raise InvalidArgument(
            "start_time must be earlier than end_time",
            details=(
                FieldViolation("start_time", "start_time must be earlier than end_time"),
                FieldViolation("end_time", "end_time must be later than start_time"),
            ),
        )
    return window
