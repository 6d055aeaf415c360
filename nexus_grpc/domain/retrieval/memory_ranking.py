"""Memory rankings outside the search pipeline: SelectMemories' picks and
memory formation's similar memories, ranked here so that every ranking of
the service lives in domain/retrieval/.

- ``selection_order``: the picks by relevance, a memory already used in the
  thread counting ``USED_PENALTY`` of its own, so fresh matches come first
  unless the old ones are clearly more relevant (domain/selection.py);
- ``by_relevance``: pass 1's picks, most relevant first, for pass 2 to read
  as many as fit;
- ``most_similar``: the memories a candidate is compared with, by cosine of
  their whole texts, above ``SEMANTIC_SIMILAR`` (domain/formation.py).

Each is a stable sort: equals keep the order they came in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")
C = TypeVar("C")

#: What a memory already used in the thread keeps of its relevance.
USED_PENALTY = 0.5

# Cosine of the two texts (MiniLM) at which a kept memory is similar enough to
# a candidate to be shown to the LLM; below it the candidate is simply new.
# Measured (tests/e2e/service/test_memory_formation.py's pairs, docs/memory-formation.md):
# memories on one subject 0.41-0.81 ("lives in Porto"/"lives in Lisbon" 0.81,
# "is learning Rust"/"knows Python well" 0.41), on different ones 0.12-0.35.
SEMANTIC_SIMILAR = 0.4


def selection_order(
    picks: Iterable[tuple[int, float, C]], used: Collection[int], limit: int
) -> list[tuple[int, float, C]]:
    """The best ``limit`` of (memory id, relevance, category), best first,
    with each used memory's relevance multiplied by ``USED_PENALTY``."""
    return sorted(
        ((mid, rel * (USED_PENALTY if mid in used else 1.0), cat) for mid, rel, cat in picks),
        key=lambda p: p[1],
        reverse=True,
    )[:limit]


def by_relevance(items: Iterable[T], relevance: Callable[[T], float]) -> list[T]:
    """``items``, most relevant first."""
    return sorted(items, key=relevance, reverse=True)


def _unit(v: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def most_similar(
    query: Sequence[float], candidates: Iterable[tuple[Sequence[float], T]], limit: int
) -> list[T]:
    """The ``limit`` candidates (vector, item) most like ``query`` by cosine,
    most similar first, leaving out those below ``SEMANTIC_SIMILAR``."""
    mine = _unit(query)
    scored = sorted(((_dot(mine, _unit(v)), item) for v, item in candidates), key=lambda s: -s[0])
    return [item for score, item in scored if score >= SEMANTIC_SIMILAR][:limit]
