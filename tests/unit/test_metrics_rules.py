"""What /metrics says, from the values it is given (observability/metrics.py),
rendered as Prometheus scrapes it (``generate_latest``) and parsed back: RPCs
counted and timed by method and code, the stream gauge, the queue depths read
from the database at scrape time (on the fakes of tests/fakes.py) and what a
scrape reports when that read cannot be made, the worker counters summed by
kind, the loop lag, query-vector cache, reranker, LLM and watch-stream families,
and how several observers are combined. No HTTP server, no socket.

What stays whole-server, in tests/e2e/server/test_metrics.py: the interceptor
feeding a real server's calls to ``Metrics`` (a call counted by its code, a
refused call, an open stream), the jobs and loop-lag families scraped over HTTP
from a running server, two servers keeping their own registries and a stopped
endpoint refusing the scrape."""

from __future__ import annotations

import asyncio
import logging
import time
from types import SimpleNamespace
from typing import Any

import grpc
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nexus_grpc.core import jobs as job_kinds
from nexus_grpc.core.llm_usage import CallTotals
from nexus_grpc.observability.metrics import (
    CombinedObserver,
    JobCollector,
    Metrics,
    combine,
)
from nexus_grpc.rerank.reranker import RerankStats
from nexus_grpc.rpc.requests import RequestObserver
from nexus_grpc.runtime.loop_lag import LoopLagMonitor
from tests.fakes import FakeDatabase

CREATE_SESSION = "/nexus.memory.v1.MemoryService/CreateSession"
GET_SESSION = "/nexus.memory.v1.MemoryService/GetSession"
WATCH = "/nexus.graph.v1.GraphService/WatchExtractions"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(metrics: Metrics) -> Samples:
    """Every sample of the registry as a scrape reads it, keyed by (name, sorted labels)."""
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def app(**parts: Any) -> SimpleNamespace:
    """The parts of App the collector reads; the optional ones absent unless given."""
    parts.setdefault("db", FakeDatabase())
    parts.setdefault("workers", [])
    return SimpleNamespace(**parts)


# RPCs and streams ---------------------------------------------------------------------


def test_rpcs_are_counted_and_timed_by_method_and_code():
    metrics = Metrics()
    metrics.observe(CREATE_SESSION, grpc.StatusCode.OK, 0.003)
    metrics.observe(GET_SESSION, grpc.StatusCode.NOT_FOUND, 0.001)
    metrics.observe(CREATE_SESSION, grpc.StatusCode.OK, 0.2)
    samples = scrape(metrics)
    assert sample(samples, "nexus_rpc_requests_total", method=CREATE_SESSION, code="OK") == 2
    assert sample(samples, "nexus_rpc_requests_total", method=GET_SESSION, code="NOT_FOUND") == 1
    assert sample(samples, "nexus_rpc_requests_total", method=GET_SESSION, code="OK") is None
    ok = {"method": CREATE_SESSION, "code": "OK"}
    assert sample(samples, "nexus_rpc_duration_seconds_count", **ok) == 2
    assert sample(samples, "nexus_rpc_duration_seconds_bucket", le="+Inf", **ok) == 2
    assert sample(samples, "nexus_rpc_duration_seconds_bucket", le="0.005", **ok) == 1
    assert abs(sample(samples, "nexus_rpc_duration_seconds_sum", **ok) - 0.203) < 1e-9


def test_the_stream_gauge_follows_streams_started_and_ended():
    metrics = Metrics()
    metrics.stream_started(WATCH)
    metrics.stream_started(WATCH)
    assert sample(scrape(metrics), "nexus_stream_subscribers", method=WATCH) == 2
    metrics.stream_ended(WATCH)
    metrics.stream_ended(WATCH)
    assert sample(scrape(metrics), "nexus_stream_subscribers", method=WATCH) == 0


def test_each_metrics_object_keeps_its_own_registry():
    one, other = Metrics(), Metrics()
    one.observe(CREATE_SESSION, grpc.StatusCode.OK, 0.01)
    counted = ("nexus_rpc_requests_total", (("code", "OK"), ("method", CREATE_SESSION)))
    assert counted in scrape(one)
    assert counted not in scrape(other)


def test_without_an_app_there_are_no_job_families():
    names = {name for name, _ in scrape(Metrics())}
    assert not any(name.startswith("nexus_job_") for name in names), names


# Several observers ---------------------------------------------------------------------


class Recorder(RequestObserver):
    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        self.seen.append(("observe", method, code, seconds))

    def stream_started(self, method: str) -> None:
        self.seen.append(("started", method))

    def stream_ended(self, method: str) -> None:
        self.seen.append(("ended", method))


def test_combine_leaves_out_the_missing_and_needs_no_fan_out_for_one():
    one = Recorder()
    assert combine() is None
    assert combine(None, None) is None
    assert combine(None, one, None) is one


def test_combined_observers_each_see_every_call():
    first, second = Recorder(), Recorder()
    both = combine(first, None, second)
    assert isinstance(both, CombinedObserver)
    both.observe(CREATE_SESSION, grpc.StatusCode.OK, 0.5)
    both.stream_started(WATCH)
    both.stream_ended(WATCH)
    expected = [
        ("observe", CREATE_SESSION, grpc.StatusCode.OK, 0.5),
        ("started", WATCH),
        ("ended", WATCH),
    ]
    assert first.seen == expected
    assert second.seen == expected


# The jobs, read at scrape time ---------------------------------------------------------


def metered(parts: SimpleNamespace) -> tuple[Metrics, JobCollector]:
    metrics = Metrics(parts)  # type: ignore[arg-type]
    assert metrics.jobs is not None
    return metrics, metrics.jobs


async def test_queue_depths_are_read_from_the_database_when_scraped():
    db = FakeDatabase()
    jobs = db.uow.jobs
    jobs.enqueue(job_kinds.EXTRACT_EPISODE, [1, 2])
    jobs.enqueue(job_kinds.INDEX_EPISODE, [1])
    queued_at = time.time() - 30
    for job in jobs.rows:
        job.created_at = queued_at
    jobs.rows[-1].state = "failed"  # the indexing job exhausted its attempts
    metrics, collector = metered(app(db=db))
    collector.bind(asyncio.get_running_loop())
    # A scrape runs on the HTTP server's thread; the read runs on the loop.
    samples = await asyncio.to_thread(scrape, metrics)
    extract, index = job_kinds.EXTRACT_EPISODE, job_kinds.INDEX_EPISODE
    assert sample(samples, "nexus_job_queue_depth", kind=extract) == 2
    assert sample(samples, "nexus_job_queue_depth", kind=index) == 0
    assert sample(samples, "nexus_job_dead_letters", kind=extract) == 0
    assert sample(samples, "nexus_job_dead_letters", kind=index) == 1
    age = sample(samples, "nexus_job_oldest_pending_age_seconds", kind=extract)
    assert age is not None and 30 <= age <= time.time() - queued_at
    assert sample(samples, "nexus_job_oldest_pending_age_seconds", kind=index) == 0
    # The next scrape reads again: a job done since is gone from the depth.
    jobs.rows = jobs.rows[1:]
    samples = await asyncio.to_thread(scrape, metrics)
    assert sample(samples, "nexus_job_queue_depth", kind=extract) == 1


async def test_a_scrape_on_the_loop_itself_reports_the_last_depths_without_waiting():
    db = FakeDatabase()
    db.uow.jobs.enqueue(job_kinds.EXTRACT_EPISODE, [1])
    metrics, collector = metered(app(db=db))
    collector.bind(asyncio.get_running_loop())
    # Nothing read yet, and the loop cannot wait on itself: no depths at all.
    assert sample(scrape(metrics), "nexus_job_queue_depth", kind="extract:episode") is None
    await asyncio.to_thread(scrape, metrics)  # from another thread: read
    db.uow.jobs.enqueue(job_kinds.EXTRACT_EPISODE, [2])
    # On the loop again: the values of the last read, not the database's now.
    assert sample(scrape(metrics), "nexus_job_queue_depth", kind="extract:episode") == 1


async def test_a_failed_read_reports_the_last_depths_and_says_so(caplog):
    db = FakeDatabase()
    db.uow.jobs.enqueue(job_kinds.EXTRACT_EPISODE, [1])
    metrics, collector = metered(app(db=db))
    collector.bind(asyncio.get_running_loop())
    await asyncio.to_thread(scrape, metrics)

    async def unavailable(fn: Any) -> Any:
        raise RuntimeError("database is locked")

    db.read = unavailable  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="nexus_grpc.observability.metrics"):
        samples = await asyncio.to_thread(scrape, metrics)
    assert sample(samples, "nexus_job_queue_depth", kind="extract:episode") == 1
    assert "queue depths unavailable (database is locked)" in caplog.text


def test_an_unbound_or_closed_loop_reports_the_last_depths():
    db = FakeDatabase()
    db.uow.jobs.enqueue(job_kinds.EXTRACT_EPISODE, [1])
    metrics, collector = metered(app(db=db))
    assert sample(scrape(metrics), "nexus_job_queue_depth", kind="extract:episode") is None
    closed = SimpleNamespace(is_closed=lambda: True)  # the server's loop, once it stopped
    collector.bind(closed)  # type: ignore[arg-type]
    assert sample(scrape(metrics), "nexus_job_queue_depth", kind="extract:episode") is None


def test_worker_counters_are_summed_by_kind():
    workers = [
        SimpleNamespace(kind="index:episodes", failures=1, completed=4),
        SimpleNamespace(kind="index:episodes", failures=2, completed=3),
        SimpleNamespace(kind="extract:episode", failures=0, completed=1),
        SimpleNamespace(),  # no kind and no counters: "unknown", nothing counted
    ]
    metrics, _ = metered(app(workers=workers))
    samples = scrape(metrics)
    assert sample(samples, "nexus_job_failures_total", kind="index:episodes") == 3
    assert sample(samples, "nexus_job_completed_total", kind="index:episodes") == 7
    assert sample(samples, "nexus_job_failures_total", kind="extract:episode") == 0
    assert sample(samples, "nexus_job_completed_total", kind="extract:episode") == 1
    assert sample(samples, "nexus_job_completed_total", kind="unknown") == 0


# The parts an App may lack -------------------------------------------------------------


def test_the_optional_families_appear_only_with_their_part():
    names = {name for name, _ in scrape(metered(app())[0])}
    for prefix in (
        "nexus_event_loop_lag",
        "nexus_watch_streams",
        "nexus_query_vector_lookups",
        "nexus_rerank_",
        "nexus_llm_",
    ):
        assert not any(name.startswith(prefix) for name in names), prefix


def test_loop_lag_is_a_histogram_whose_inf_bucket_is_every_sample():
    monitor = LoopLagMonitor()
    for lag in (0.0005, 0.003, 0.07, 0.3):
        monitor.record(lag)
    samples = scrape(metered(app(loop_lag=monitor))[0])
    assert sample(samples, "nexus_event_loop_lag_seconds_count") == 4
    assert sample(samples, "nexus_event_loop_lag_seconds_bucket", le="+Inf") == 4
    assert sample(samples, "nexus_event_loop_lag_seconds_bucket", le="0.1") == 3
    assert sample(samples, "nexus_event_loop_lag_seconds_bucket", le="0.001") == 1
    assert abs(sample(samples, "nexus_event_loop_lag_seconds_sum") - 0.3735) < 1e-9
    assert sample(samples, "nexus_event_loop_lag_max_seconds") == 0.3


def test_watch_streams_open_their_limit_and_refusals():
    events = SimpleNamespace(watchers=3, max_watchers=8, refused=2)
    samples = scrape(metered(app(graph_events=events))[0])
    assert sample(samples, "nexus_watch_streams") == 3
    assert sample(samples, "nexus_watch_streams_limit") == 8
    assert sample(samples, "nexus_watch_streams_refused_total") == 2


def test_a_negative_watch_limit_is_reported_as_no_limit():
    events = SimpleNamespace(watchers=0, max_watchers=-1, refused=0)
    assert sample(scrape(metered(app(graph_events=events))[0]), "nexus_watch_streams_limit") == 0


def test_query_vectors_are_counted_by_where_they_came_from():
    cache = SimpleNamespace(hits=5, misses=2)
    samples = scrape(metered(app(query_cache=cache))[0])
    assert sample(samples, "nexus_query_vector_lookups_total", source="cache") == 5
    assert sample(samples, "nexus_query_vector_lookups_total", source="model") == 2


def test_rerank_outcomes_durations_and_cooldown():
    stats = RerankStats()
    stats.record("ok", 0.02)
    stats.record("ok", 0.4)
    stats.record("timeout", 2.0)
    stats.record("skipped", None)  # never reached the service: not in the histogram
    reranker = SimpleNamespace(stats=stats, cooling_down=lambda: 12.5)
    samples = scrape(metered(app(reranker=reranker))[0])
    assert sample(samples, "nexus_rerank_requests_total", outcome="ok") == 2
    assert sample(samples, "nexus_rerank_requests_total", outcome="timeout") == 1
    assert sample(samples, "nexus_rerank_requests_total", outcome="skipped") == 1
    assert sample(samples, "nexus_rerank_requests_total", outcome="unreachable") == 0
    assert sample(samples, "nexus_rerank_duration_seconds_count") == 3
    assert sample(samples, "nexus_rerank_duration_seconds_bucket", le="+Inf") == 3
    assert sample(samples, "nexus_rerank_duration_seconds_bucket", le="0.025") == 1
    assert sample(samples, "nexus_rerank_duration_seconds_bucket", le="0.5") == 2
    assert abs(sample(samples, "nexus_rerank_duration_seconds_sum") - 2.42) < 1e-9
    assert sample(samples, "nexus_rerank_cooldown_seconds") == 12.5


def test_llm_calls_tokens_and_seconds_by_stage():
    usage = CallTotals(
        calls={("extract", "ok"): 3, ("extract", "error"): 1, ("summary", "ok"): 2},
        tokens={("extract", "prompt"): 900, ("extract", "completion"): 120},
        seconds={"extract": 4.5, "summary": 1.25},
    )
    samples = scrape(metered(app(llm=SimpleNamespace(usage=usage)))[0])
    assert sample(samples, "nexus_llm_calls_total", stage="extract", outcome="ok") == 3
    assert sample(samples, "nexus_llm_calls_total", stage="extract", outcome="error") == 1
    assert sample(samples, "nexus_llm_calls_total", stage="summary", outcome="ok") == 2
    tokens = "nexus_llm_tokens_total"
    assert sample(samples, tokens, stage="extract", direction="prompt") == 900
    assert sample(samples, tokens, stage="extract", direction="completion") == 120
    assert sample(samples, "nexus_llm_seconds_total", stage="extract") == 4.5
    assert sample(samples, "nexus_llm_seconds_total", stage="summary") == 1.25
