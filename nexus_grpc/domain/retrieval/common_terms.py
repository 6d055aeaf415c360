"""Words so common in a scope that they carry no ranking signal.

In a conversation store some words are on nearly every episode of a scope:
the speakers' names ("Caroline: ..."), a user's own name, the project's
subject. Asked "What did Caroline research?", an embedder weighs "Caroline"
as heavily as "research" and ranks episodes by how much they are about
Caroline, which is all of them. A word found in more than half the scope's
episodes is therefore left out of the semantic query, and out of the keyword
query, where bm25 would give it almost no weight anyway but FTS5 would still
walk its postings (every row in the scope).

Document frequency is estimated from the scope's most recent episodes and
cached per scope for a minute: exact counts would cost a walk of every
common word's postings on every search, which is what this avoids.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Sequence
from itertools import chain

from nexus_grpc.core.loading_cache import LoadingCache
from nexus_grpc.domain.retrieval.keyword_query import WORD

#: A word in more than this share of the scope's episodes is common.
COMMON_SHARE = 0.5
#: Episodes read to estimate the shares; fewer than MIN_SAMPLE say nothing reliable.
SAMPLE_SIZE = 200
MIN_SAMPLE = 30
TTL_SECONDS = 60.0
MAX_SCOPES = 512


class ScopeVocabulary:
    """Per-scope estimates of which words are common, cached with a TTL. A
    hybrid search asks for one scope from both halves at once: they share one
    read (core/loading_cache.py)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._cache: LoadingCache[Hashable, frozenset[str]] = LoadingCache(
            MAX_SCOPES, ttl=TTL_SECONDS, clock=clock
        )

    async def common(
        self,
        scope: Hashable,
        sample: Callable[[int], Awaitable[list[str]]],
    ) -> frozenset[str]:
        """The common words of ``scope`` (any hashable that names it);
        ``sample(n)`` reads up to n of its most recent texts."""

        async def read() -> frozenset[str]:
            return common_words(await sample(SAMPLE_SIZE))

        return await self._cache.get(scope, read)


def common_words(texts: Sequence[str]) -> frozenset[str]:
    if len(texts) < MIN_SAMPLE:
        return frozenset()
    # Each text's distinct words, counted in one C-level pass.
    counts = Counter(chain.from_iterable(set(WORD.findall(t.lower())) for t in texts))
    floor = COMMON_SHARE * len(texts)
    return frozenset(w for w, n in counts.items() if n > floor)


def without(query: str, common: frozenset[str]) -> str:
    """``query`` with the common words (and a possessive 's after them) removed;
    the query itself when nothing would remain."""
    if not common:
        return query
    kept = re.sub(
        r"\b(\w+)(?:'s)?\b",
        lambda m: "" if m.group(1).lower() in common else m.group(0),
        query,
    )
    kept = re.sub(r"\s+", " ", kept).strip()
    return kept if re.search(r"\w", kept) else query
