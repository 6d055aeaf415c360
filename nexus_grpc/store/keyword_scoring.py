"""Keyword scores that depend only on what the search may read, on both stores.

A keyword score weighs each query word by how rare it is (its inverse
document frequency, IDF). Counted over the whole table, as FTS5's ``bm25()``
counts it, one tenant's texts move another tenant's scores and order: any key
learns in two searches whether a word is anywhere on the server (security
probe 5). So every count a score uses is taken within the search's own scope:
the episodes of the searched sessions (and window), the memories the caller
may see. PostgreSQL's episode search already counted so (its memory search
uses no counts at all); SQLite's now does too (store/sqlite/keyword_search.py).

On SQLite each word's score in a row is BM25's, with the scope's IDF and the
row's column weights: the word's weight in the row is the sum of the weights
of the columns that hold it (an episode's own turns 1.0 each, its
neighbouring turns 0.5; a memory's title and content 1.0 each), saturated as
BM25 saturates a term frequency (k1 = 1.2), with no length normalisation.
FTS5 gives a column's term counts, document lengths and average lengths only
to auxiliary functions written in C, which Python's ``sqlite3`` cannot add;
on the LoCoMo dev split this scoring is at least as good as FTS5's own bm25
was (docs/recall.md, "Scores from the caller's own scope").
"""

from __future__ import annotations

import math
import re

#: BM25's term-frequency saturation.
K1 = 1.2
#: The weight of a word in half a scope's texts or more (FTS5's own floor).
NEGLIGIBLE_IDF = 1e-6

_QUOTED = re.compile(r'"((?:[^"]|"")*)"')


def match_words(match: str) -> list[str]:
    """The quoted words of a keyword query (domain/retrieval/keyword_query.py
    writes them ``"a" OR "b"``), in order."""
    return [m.group(1).replace('""', '"') for m in _QUOTED.finditer(match)]


def scope_idf(total: int, matched: int) -> float:
    """How much a word found in ``matched`` of the scope's ``total`` texts
    weighs: BM25's IDF as FTS5 computes it, a word in half the texts or more
    weighing almost nothing (1e-6), so that a list of such matches orders
    nothing (domain/retrieval/ranking.py's MEANINGFUL_BM25)."""
    idf = math.log((total - matched + 0.5) / (matched + 0.5))
    return idf if idf > 0 else NEGLIGIBLE_IDF
