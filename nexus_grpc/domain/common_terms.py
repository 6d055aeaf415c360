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

import asyncio
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from itertools import chain

from nexus_grpc.domain.fts import WORD

#: A word in more than this share of the scope's episodes is common.
COMMON_SHARE = 0.5
#: Episodes read to estimate the shares; fewer than MIN_SAMPLE say nothing reliable.
SAMPLE_SIZE = 200
MIN_SAMPLE = 30
TTL_SECONDS = 60.0
MAX_SCOPES = 512


class ScopeVocabulary:
    """Per-scope estimates of which words are common, cached with a TTL."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cache: OrderedDict[Hashable, tuple[float, frozenset[str]]] = OrderedDict()
        # A miss being read: a hybrid search asks for the same scope from both
        # halves at once, and both should wait on one read.
        self._reading: dict[Hashable, asyncio.Future[frozenset[str]]] = {}

    async def common(
        self,
        scope: Hashable,
        sample: Callable[[int], Awaitable[list[str]]],
    ) -> frozenset[str]:
        """The common words of ``scope`` (any hashable that names it);
        ``sample(n)`` reads up to n of its most recent texts."""
        key = scope
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(key)
            return cached[1]
        reading = self._reading.get(key)
        if reading is not None:
            return await asyncio.shield(reading)
        future: asyncio.Future[frozenset[str]] = asyncio.get_running_loop().create_future()
        self._reading[key] = future
        try:
            found = common_words(await sample(SAMPLE_SIZE))
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here: a waiter may not exist
            raise
        finally:
            del self._reading[key]
        future.set_result(found)
        self._cache[key] = (now + TTL_SECONDS, found)
        self._cache.move_to_end(key)
        while len(self._cache) > MAX_SCOPES:
            self._cache.popitem(last=False)
        return found


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
