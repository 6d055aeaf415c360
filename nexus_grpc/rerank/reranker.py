"""A rerank service as search uses it: within the caller's deadline, skipped
for a while after it fails, and counted.

Search must never wait on a reranker that is gone: a failure (no answer in
time, unreachable, an error status, a malformed answer) sends every search
of the next COOLDOWN_START seconds straight to the fused order, doubling up
to COOLDOWN_MAX while it keeps failing; the first answer ends it. A timeout
that only the caller's short deadline caused is not the service's fault and
starts no cooldown.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nexus_grpc.rerank.client import RerankClient
from nexus_grpc.rerank.rerank_errors import RerankError, RerankSkipped, RerankTimeout
from nexus_grpc.runtime import deadlines

#: A cross-encoder's window is 512 tokens for most rerankers (8k for
#: bge-reranker-v2-m3): a longer text costs time and adds nothing it can read.
MAX_DOCUMENT_CHARS = 2000
#: Of what the caller has left, the share kept back to answer after reranking
#: (the page's snippets, the stream): a reranker that takes all the time left
#: would turn a degraded answer into DEADLINE_EXCEEDED.
DEADLINE_SHARE_KEPT = 0.25
#: ... but never more than this.
MAX_DEADLINE_KEPT = 0.25
#: Less than this left: the reranker is not asked.
MIN_BUDGET = 0.005
COOLDOWN_START = 2.0
COOLDOWN_MAX = 60.0
#: Seconds: rerank calls from a few ms (a GPU, a handful of short texts) to
#: the default timeout and past it.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
OUTCOMES = ("ok", "timeout", "unreachable", "rejected", "bad_answer", "skipped")


@dataclass
class RerankStats:
    """Counters read by the metrics endpoint (plain ints: a read from the
    scrape thread needs no lock)."""

    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    bucket_counts: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))
    asked: int = 0  # calls that reached the service (the histogram's count)
    total_seconds: float = 0.0

    def record(self, outcome: str, seconds: float | None) -> None:
        self.calls[outcome] = self.calls.get(outcome, 0) + 1
        if seconds is None:
            return
        self.asked += 1
        self.total_seconds += seconds
        for i, bound in enumerate(DURATION_BUCKETS):
            if seconds <= bound:
                self.bucket_counts[i] += 1


class Reranker:
    """``candidates`` fused hits of a search go to ``client``, for at most
    ``timeout`` seconds (less when the caller's deadline is nearer)."""

    def __init__(
        self,
        client: RerankClient,
        *,
        candidates: int,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.candidates = candidates
        self.timeout = timeout
        self.stats = RerankStats()
        self._clock = clock
        self._cooldown = 0.0
        self._skip_until = 0.0
        self.last_error = ""

    @property
    def endpoint(self) -> str:
        return self.client.endpoint

    def cooling_down(self) -> float:
        """Seconds until searches ask the service again; 0 when they do now."""
        return max(0.0, self._skip_until - self._clock())

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """A relevance score for each document, or a RerankError whose message
        says why the search keeps its fused order."""
        wait = self.cooling_down()
        if wait > 0:
            self.stats.record("skipped", None)
            raise RerankSkipped(f"skipped for {wait:.1f} s more after a failure: {self.last_error}")
        budget, callers = self._budget()
        if budget < MIN_BUDGET:
            self.stats.record("skipped", None)
            raise RerankSkipped("the call's deadline left no time for the reranker")
        texts = [d[:MAX_DOCUMENT_CHARS] for d in documents]
        started = time.monotonic()
        try:
            scores = await self.client.scores(query, texts, budget)
        except RerankError as exc:
            self.stats.record(exc.outcome, time.monotonic() - started)
            if not (callers and isinstance(exc, RerankTimeout)):
                self._failed(exc.message)
            raise
        self.stats.record("ok", time.monotonic() - started)
        self._cooldown = 0.0
        self._skip_until = 0.0
        return scores

    def _budget(self) -> tuple[float, bool]:
        """Seconds the service may take, and whether the caller's deadline (not
        our own timeout) set them."""
        left = deadlines.remaining()
        if left is None:
            return self.timeout, False
        usable = left - min(MAX_DEADLINE_KEPT, max(0.0, left) * DEADLINE_SHARE_KEPT)
        if usable < self.timeout:
            return usable, True
        return self.timeout, False

    def _failed(self, message: str) -> None:
        self.last_error = message
        self._cooldown = min(COOLDOWN_MAX, self._cooldown * 2 or COOLDOWN_START)
        self._skip_until = self._clock() + self._cooldown

    async def check(self, timeout: float) -> tuple[bool, str]:  # noqa: ASYNC109
        """Asks the service now (past any cooldown): (answered well, detail)."""
        model = f" ({self.client.model})" if self.client.model else ""
        started = time.monotonic()
        try:
            await self.client.scores("health check", ["a health check", "something else"], timeout)
        except RerankError as exc:
            return False, exc.message
        took = 1000 * (time.monotonic() - started)
        detail = (
            f"{self.endpoint}{model}: answered in {took:.0f} ms; reorders the top"
            f" {self.candidates} fused candidates of each search"
        )
        wait = self.cooling_down()
        if wait > 0:
            detail += f"; searches skip it for {wait:.0f} s more after: {self.last_error}"
        return True, detail

    async def close(self) -> None:
        await self.client.close()
