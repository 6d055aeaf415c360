"""Turning user text into a safe FTS5 query.

User text is never passed to MATCH as syntax: quotes, ``*``, ``:``, NEAR and
unbalanced parentheses would raise "fts5: syntax error" (the seed surfaced
that as a 500).  Each word becomes a quoted string, and words are ORed so
that bm25 ranks documents matching more of them higher.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 16


def match_expression(query: str) -> str | None:
    """The MATCH expression for ``query``, or None when it has no words."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:MAX_TERMS]
    if not words:
        return None
    return " OR ".join(f'"{w}"' for w in words)
