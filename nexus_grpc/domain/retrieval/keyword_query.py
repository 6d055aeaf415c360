"""Turning user text into a safe FTS5 query.

User text is never passed to MATCH as syntax: quotes, ``*``, ``:``, NEAR and
unbalanced parentheses would raise "fts5: syntax error" (the seed surfaced
that as a 500).  Each word becomes a quoted string, and words are ORed so
that bm25 ranks documents matching more of them higher.

Common English function words are dropped (unless the query has nothing
else): ORing "the" into a query matches nearly every episode, which costs a
scan of the whole scope and adds nothing to the ranking.  The caller may drop
more: words common in the scope being searched (see common_terms.py).
"""

from __future__ import annotations

import re
from collections.abc import Collection

WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 16
STOPWORDS = frozenset(
    """
    a about above after again all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself
    just me more most my no nor not now of off on once only or other our ours out over own
    same she should so some such than that the their theirs them then there these they this
    those through to too under until up very was we were what when where which while who
    whom why will with would you your yours
    """.split()
)


def words(text: str) -> list[str]:
    """The distinct lower-cased words of ``text``, in order."""
    return list(dict.fromkeys(w.lower() for w in WORD.findall(text)))


def match_expression(query: str, drop: Collection[str] = ()) -> str | None:
    """The MATCH expression for ``query``, or None when it has no words.

    Words in ``drop`` are left out unless nothing else would remain."""
    found = words(query)
    content = [w for w in found if w not in STOPWORDS] or found
    content = [w for w in content if w not in drop] or content
    if not content:
        return None
    return " OR ".join(f'"{w}"' for w in content[:MAX_TERMS])
