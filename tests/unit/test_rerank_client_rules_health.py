"""What the reranker says of its service when the server is asked
(rerank/reranker.py's ``check``, for GetServiceStatus and ``doctor``), and
what it counts for /metrics (``RerankStats``), on a scripted service without
HTTP: a service that answers is described with what it does and any cooldown
still running; one that fails is not ready, in its own words; the check asks
it even during a cooldown; each call lands in its outcome and its duration's
buckets.

The stage's reordering, cooldown and deadlines are
tests/unit/test_rerank_rules_stage.py's; the status and /metrics served with a
reranker configured, tests/e2e/service/test_search_rerank.py's."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nexus_grpc.rerank import RerankTimeout
from nexus_grpc.rerank.rerank_errors import RerankRejected
from nexus_grpc.rerank.reranker import DURATION_BUCKETS, Reranker, RerankStats


class Service:
    """The rerank service as a script: a score per document, or ``fault``."""

    endpoint = "http://reranker.test/rerank"

    def __init__(self, model: str = "") -> None:
        self.model = model
        self.fault: Exception | None = None
        self.asked: list[tuple[str, list[str], float]] = []
        self.closed = False

    async def scores(self, query: str, texts: Sequence[str], budget: float) -> list[float]:
        self.asked.append((query, list(texts), budget))
        if self.fault is not None:
            raise self.fault
        return [0.5 for _ in texts]

    async def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reranker(service: Service, clock: Clock | None = None) -> Reranker:
    return Reranker(service, candidates=30, timeout=2.0, clock=clock or Clock())  # type: ignore[arg-type]


async def test_a_service_that_answers_is_described_with_what_it_does() -> None:
    service = Service(model="bge-reranker-v2-m3")
    ok, detail = await reranker(service).check(1.5)
    assert ok
    assert detail.startswith("http://reranker.test/rerank (bge-reranker-v2-m3): answered in ")
    assert detail.endswith("ms; reorders the top 30 fused candidates of each search")
    assert service.asked == [("health check", ["a health check", "something else"], 1.5)]


async def test_a_failing_service_is_not_ready_in_its_own_words() -> None:
    service = Service()
    service.fault = RerankRejected(503, "http://reranker.test/rerank answered HTTP 503: Loading")
    assert await reranker(service).check(1.5) == (
        False,
        "http://reranker.test/rerank answered HTTP 503: Loading",
    )


async def test_the_check_asks_during_a_cooldown_and_says_how_long_searches_skip() -> None:
    service, clock = Service(), Clock()
    ranker = reranker(service, clock)
    service.fault = RerankTimeout("http://reranker.test/rerank did not answer within 2.00 s")
    with pytest.raises(RerankTimeout):
        await ranker.rerank("q", ["a"])
    clock.now += 0.5
    service.fault = None
    ok, detail = await ranker.check(1.5)
    assert ok and len(service.asked) == 2  # asked, past the cooldown
    assert detail.endswith(
        "; searches skip it for 2 s more after:"
        " http://reranker.test/rerank did not answer within 2.00 s"
    )
    # The check is no search: the cooldown still runs.
    assert ranker.cooling_down() == pytest.approx(1.5)


def test_each_call_counts_under_its_outcome_and_its_durations_buckets() -> None:
    stats = RerankStats()
    stats.record("ok", 0.02)
    stats.record("ok", 0.3)
    stats.record("timeout", 2.0)
    stats.record("skipped", None)  # never asked: no duration
    # Every outcome is a series from the start, at zero until it happens.
    assert stats.calls == {"ok": 2, "timeout": 1, "unreachable": 0, "rejected": 0,
                           "bad_answer": 0, "skipped": 1}  # fmt: skip
    assert stats.asked == 3 and stats.total_seconds == pytest.approx(2.32)
    # Cumulative, as Prometheus' buckets are: each bound counts what took no longer.
    expected = [sum(s <= b for s in (0.02, 0.3, 2.0)) for b in DURATION_BUCKETS]
    assert stats.bucket_counts == expected
    assert expected[DURATION_BUCKETS.index(0.025)] == 1
    assert expected[DURATION_BUCKETS.index(2.0)] == 3


async def test_closing_the_reranker_closes_its_client() -> None:
    service = Service()
    await reranker(service).close()
    assert service.closed
