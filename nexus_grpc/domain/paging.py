"""Page sizes and opaque page tokens (AIP-158).

A token encodes the last id of the previous page (keyset pagination), so a
page is an index range scan however deep the client pages, and rows inserted
meanwhile neither repeat nor vanish.
"""

from __future__ import annotations

import base64

from nexus_grpc.core.models import Page
from nexus_grpc.domain.validation import quoted
from nexus_grpc.errors import InvalidArgument

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


def page_size(requested: int) -> int:
    if requested < 0:
        raise InvalidArgument(f"page_size must not be negative, got {requested}", field="page_size")
    if requested == 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


def encode_token(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"after:{last_id}".encode()).decode().rstrip("=")


def decode_token(token: str) -> int | None:
    """The last id of the previous page, or None for the first page."""
    if not token:
        return None
    try:
        padded = token + "=" * (-len(token) % 4)
        text = base64.urlsafe_b64decode(padded.encode()).decode()
        prefix, _, value = text.partition(":")
        last_id = int(value)
        if prefix != "after" or not 0 <= last_id < 2**63:
            raise ValueError(text)
        return last_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(
            f"page_token is not a token this service issued: {quoted(token)}",
            field="page_token",
        ) from exc


def page(rows: list, size: int) -> Page:
    """A page from rows fetched with one extra: its presence means more follow."""
    if len(rows) > size:
        rows = rows[:size]
        return Page(rows, encode_token(rows[-1].id))
    return Page(rows, "")
