"""The characters no name, id or title may hold, for the server and its clients alike.

The server refuses them (``domain/validation.py``) and writes them escaped in
its logs (``observability/logs.py``); the client-side tools (the MCP server,
the framework adapters) check for the same ones before a call, so a bad name
fails where it is given. One rule, here, below both sides: it imports nothing.
"""

from __future__ import annotations

import re

__all__ = ["CONTROL_CHARS", "escape_controls"]

#: Characters that rewrite what a terminal or a log viewer shows: C0 and C1
#: controls (newlines, ANSI escapes), line and paragraph separators, and the
#: bidirectional embeddings, overrides, isolates and marks that reorder text.
CONTROL_CHARS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def escape_controls(value: str) -> str:
    """``value`` with every CONTROL_CHARS character written as an escape (``\\x1b``)."""
    return CONTROL_CHARS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), value)
