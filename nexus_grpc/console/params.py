"""A page's query string, checked: its state (a date, a user, a query) comes
from the URL, so a bad value is the person's typo, answered with 400 and
what is wrong, before any call to the server."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

__all__ = ["BadRequest", "as_timestamp", "choice", "flag", "positive_id", "text"]

MAX_TEXT = 1000


class BadRequest(Exception):
    """A query parameter the console cannot use; the message names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = f"{field}: {message}"


def positive_id(params: Mapping[str, str], name: str, *, required: bool = False) -> int:
    raw = params.get(name, "").strip()
    if not raw:
        if required:
            raise BadRequest(name, "is required")
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(name, f"must be a positive id, got {raw[:40]!r}") from None
    if value <= 0 or value >= 2**63:
        raise BadRequest(name, f"must be a positive id, got {value}")
    return value


def path_id(raw: str, name: str) -> int:
    return positive_id({name: raw}, name, required=True)


def text(params: Mapping[str, str], name: str, *, limit: int = MAX_TEXT) -> str:
    value = params.get(name, "")
    if len(value) > limit:
        raise BadRequest(name, f"is {len(value)} characters; the limit is {limit}")
    return value.strip()


def choice(params: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = params.get(name, "").strip().lower() or default
    if value not in allowed:
        raise BadRequest(name, f"must be one of {', '.join(allowed)}, got {value[:40]!r}")
    return value


def flag(params: Mapping[str, str], name: str) -> bool:
    value = params.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise BadRequest(name, f"must be 1 or 0, got {value[:40]!r}")


def parse_time(raw: str, name: str) -> datetime:
    """RFC 3339 (``2026-03-01T12:00:00Z``), a date alone (midnight UTC), or
    what a datetime-local input sends (``2026-03-01T12:00``, taken as UTC)."""
    value = raw.strip()
    try:
        if len(value) == 10:
            return datetime.fromisoformat(value).replace(tzinfo=UTC)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadRequest(
            name, f"must be an RFC 3339 time such as 2026-03-01T12:00:00Z, got {value[:40]!r}"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def as_timestamp(params: Mapping[str, str], name: str) -> Timestamp | None:
    raw = params.get(name, "").strip()
    if not raw:
        return None
    when = parse_time(raw, name)
    if not 1 <= when.year <= 9999:
        raise BadRequest(name, "is out of range")
    ts = Timestamp()
    ts.FromDatetime(when.astimezone(UTC))
    return ts
