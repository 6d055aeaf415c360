"""List pages that fit in one response message.

A page is bounded by count (``page_size``) in the domain, but a count says
nothing about bytes: 50 episodes of 100,000 characters each are ~10 MB,
past the message limit, and the client got RESOURCE_EXHAUSTED for a call
the server had answered. Here a page is also cut where the next item would
take the encoded response past the limit; the token then resumes after the
last item sent, so the client pages on and misses nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from google.protobuf.message import Message

from nexus_grpc.core.models import Page
from nexus_grpc.domain import paging

#: Room left for the rest of the response (token, tags, length prefixes).
ENVELOPE_BYTES = 16 * 1024
#: A repeated field's tag and length prefix, at most, per item.
PER_ITEM_BYTES = 6


class HasId(Protocol):
    @property
    def id(self) -> int: ...


T = TypeVar("T", bound=HasId)
M = TypeVar("M", bound=Message)


def fitted(page: Page[T], convert: Callable[[T], M], limit: int) -> tuple[list[M], str]:
    """The page's items as messages, as many as fit ``limit`` bytes (always at
    least one), and the token of the next page."""
    messages = [convert(item) for item in page.items]
    count = fit_count(messages, limit)
    if count < len(messages):
        return messages[:count], paging.encode_token(page.items[count - 1].id)
    return messages, page.next_token


def fit_count(messages: Sequence[Message], limit: int) -> int:
    if limit <= 0:
        return len(messages)
    budget = limit - ENVELOPE_BYTES
    used = 0
    for i, message in enumerate(messages):
        used += message.ByteSize() + PER_ITEM_BYTES
        if i and used > budget:
            return i
    return len(messages)
