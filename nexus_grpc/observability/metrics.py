"""Prometheus metrics on a separate HTTP port (``--metrics-listen``).

Everything lives in the server's own ``CollectorRegistry``, so several servers
in one process (tests) never collide.  RPC counts, latencies and stream
subscribers are recorded as calls happen (``Metrics`` is the interceptor's
``RequestObserver``); queue depths and worker counters are read when
Prometheus scrapes, so they are never stale:

- ``nexus_rpc_requests_total{method,code}``: finished RPCs.
- ``nexus_rpc_duration_seconds{method,code}``: RPC latency histogram.
- ``nexus_stream_subscribers{method}``: server streams open now.
- ``nexus_job_queue_depth{kind}``: background jobs pending or running.
- ``nexus_job_oldest_pending_age_seconds{kind}``: age of the oldest of them.
- ``nexus_job_dead_letters{kind}``: jobs that exhausted their attempts.
- ``nexus_job_failures_total{kind}`` / ``nexus_job_completed_total{kind}``: job
  attempts that failed / succeeded in this process.
- ``nexus_event_loop_lag_seconds`` (histogram) and
  ``nexus_event_loop_lag_max_seconds``: how late the event loop runs.
- ``nexus_watch_streams`` / ``nexus_watch_streams_limit``: WatchExtractions
  streams holding a slot now, and ``--max-watch-streams`` (0: no limit).
- ``nexus_query_vector_lookups_total{source}``: search-query vectors from the
  cache (``--query-vector-cache``) or from the model.
- ``nexus_watch_streams_refused_total``: WatchExtractions calls refused at that
  limit (the general RPC cap's refusals are in ``nexus_rpc_requests_total``).
- ``nexus_rerank_requests_total{outcome}`` (``--reranker-url``): searches the
  reranker ordered (``ok``) or left in the fused order, by why (``timeout``,
  ``unreachable``, ``rejected``, ``bad_answer``, ``skipped``: cooling down after
  a failure or no time left in the call); ``nexus_rerank_duration_seconds``
  (histogram): the calls that reached it; ``nexus_rerank_cooldown_seconds``:
  how long searches will still skip it after a failure (0: they ask it).
- ``nexus_llm_calls_total{stage,outcome}``, ``nexus_llm_tokens_total{stage,direction}``
  (``prompt``/``completion``) and ``nexus_llm_seconds_total{stage}``: every
  request this process sent to the LLM server (core/llm_usage.py). No project
  or tenant label, so the series stay few whatever the tenants; per project
  and tenant, ``GetUsage`` reads the durable account.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from nexus_grpc.rerank.reranker import DURATION_BUCKETS as RERANK_BUCKETS
from nexus_grpc.rpc.requests import RequestObserver
from nexus_grpc.runtime.loop_lag import LAG_BUCKETS, LoopLagMonitor
from nexus_grpc.store.jobs import QueueDepth

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from nexus_grpc.app import App
    from nexus_grpc.core.events import EventBroadcaster
    from nexus_grpc.embedding import QueryVectorCache
    from nexus_grpc.llm import LLMClient
    from nexus_grpc.rerank import Reranker

log = logging.getLogger(__name__)

# Seconds: from a cached read (~100 µs) to a slow LLM-backed stream.
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
)  # fmt: skip
#: How long a scrape waits for the queue-depth query before reporting the last values.
SCRAPE_DB_TIMEOUT = 2.0


class Metrics(RequestObserver):
    def __init__(self, app: App | None = None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "nexus_rpc_requests",
            "Finished RPCs by method and status code.",
            ("method", "code"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "nexus_rpc_duration_seconds",
            "RPC latency by method and status code.",
            ("method", "code"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.streams = Gauge(
            "nexus_stream_subscribers",
            "Server-streaming RPCs open now (e.g. WatchExtractions subscribers).",
            ("method",),
            registry=self.registry,
        )
        self.jobs: JobCollector | None = None
        if app is not None:
            self.jobs = JobCollector(app)
            self.registry.register(self.jobs)

    # RequestObserver: called on the event loop, cheap and lock-protected.
    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        self.requests.labels(method, code.name).inc()
        self.latency.labels(method, code.name).observe(seconds)

    def stream_started(self, method: str) -> None:
        self.streams.labels(method).inc()

    def stream_ended(self, method: str) -> None:
        self.streams.labels(method).dec()


class JobCollector(Collector):
    """Queue depths from SQLite and worker counters, read at scrape time.

    Scrapes run on the HTTP server's thread; the query runs on the server's
    event loop (the ``Database`` belongs to it) and the thread waits for it.
    """

    def __init__(self, app: App) -> None:
        self._app = app
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last: list[QueueDepth] = []

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def _depths(self) -> list[QueueDepth]:
        loop = self._loop
        if loop is None or loop.is_closed():
            return self._last
        try:
            if asyncio.get_running_loop() is loop:
                return self._last  # never block the loop on itself
        except RuntimeError:
            pass
        future = asyncio.run_coroutine_threadsafe(
            self._app.db.read(lambda uow: uow.jobs.depths()), loop
        )
        try:
            self._last = future.result(SCRAPE_DB_TIMEOUT)
        except Exception as exc:
            future.cancel()
            log.warning("metrics: queue depths unavailable (%s); reporting the last values", exc)
        return self._last

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            "nexus_job_queue_depth", "Background jobs pending or running.", labels=("kind",)
        )
        age = GaugeMetricFamily(
            "nexus_job_oldest_pending_age_seconds",
            "Age of the oldest pending or running job.",
            labels=("kind",),
        )
        dead = GaugeMetricFamily(
            "nexus_job_dead_letters",
            "Jobs that exhausted their attempts (failed; RequeueFailed or reindex retries).",
            labels=("kind",),
        )
        for q in self._depths():
            depth.add_metric((q.kind,), q.pending)
            age.add_metric((q.kind,), q.oldest_pending_age)
            dead.add_metric((q.kind,), q.failed)
        failures = CounterMetricFamily(
            "nexus_job_failures", "Job attempts that failed, by kind.", labels=("kind",)
        )
        completed = CounterMetricFamily(
            "nexus_job_completed", "Job attempts that succeeded, by kind.", labels=("kind",)
        )
        for kind, (failed, done) in _worker_counts(self._app.workers).items():
            failures.add_metric((kind,), failed)
            completed.add_metric((kind,), done)
        yield from (depth, age, dead, failures, completed)
        yield from _watch_metrics(getattr(self._app, "graph_events", None))
        yield from _loop_lag_metrics(getattr(self._app, "loop_lag", None))
        yield from _query_cache_metrics(getattr(self._app, "query_cache", None))
        yield from _rerank_metrics(getattr(self._app, "reranker", None))
        yield from _llm_metrics(getattr(self._app, "llm", None))


def _llm_metrics(llm: LLMClient | None) -> Iterator[Metric]:
    """What the LLM was asked, by stage: calls by outcome, tokens each way,
    seconds. A stage's share of tokens is where the model's time goes."""
    if llm is None:
        return
    calls, tokens, seconds = llm.usage.snapshot()
    by_outcome = CounterMetricFamily(
        "nexus_llm_calls",
        "Requests sent to the LLM server, by stage and how they ended.",
        labels=("stage", "outcome"),
    )
    for (stage, outcome), n in sorted(calls.items()):
        by_outcome.add_metric((stage, outcome), n)
    both = CounterMetricFamily(
        "nexus_llm_tokens",
        "Tokens the LLM server read (prompt) and wrote (completion), by stage.",
        labels=("stage", "direction"),
    )
    for (stage, direction), n in sorted(tokens.items()):
        both.add_metric((stage, direction), n)
    took = CounterMetricFamily(
        "nexus_llm_seconds",
        "Seconds spent waiting on the LLM server, by stage.",
        labels=("stage",),
    )
    for stage, total in sorted(seconds.items()):
        took.add_metric((stage,), total)
    yield from (by_outcome, both, took)


def _rerank_metrics(reranker: Reranker | None) -> Iterator[Metric]:
    """The reranker's outcomes: a rising share of anything but ``ok`` means
    searches are answering in the fused order (each hit says why)."""
    if reranker is None:
        return
    stats = reranker.stats
    calls = CounterMetricFamily(
        "nexus_rerank_requests",
        "Searches sent to the reranker or kept in the fused order, by outcome.",
        labels=("outcome",),
    )
    for outcome, count in list(stats.calls.items()):
        calls.add_metric((outcome,), count)
    yield calls
    pairs = zip(RERANK_BUCKETS, stats.bucket_counts, strict=True)
    buckets = [(str(bound), float(n)) for bound, n in pairs]
    buckets.append(("+Inf", float(stats.asked)))
    yield HistogramMetricFamily(
        "nexus_rerank_duration_seconds",
        "How long the rerank calls that reached the service took.",
        buckets=buckets,
        sum_value=stats.total_seconds,
    )
    yield GaugeMetricFamily(
        "nexus_rerank_cooldown_seconds",
        "Seconds searches still skip the reranker after a failure (0: they ask it).",
        value=reranker.cooling_down(),
    )


def _query_cache_metrics(cache: QueryVectorCache | None) -> Iterator[Metric]:
    """Search queries answered without the model: a hit rate near zero means
    the cache only costs memory (``--query-vector-cache 0``)."""
    if cache is None:
        return
    lookups = CounterMetricFamily(
        "nexus_query_vector_lookups",
        "Search-query vectors asked for, by where they came from (cache: remembered or"
        " shared with a concurrent call; model: embedded).",
        labels=("source",),
    )
    lookups.add_metric(("cache",), cache.hits)
    lookups.add_metric(("model",), cache.misses)
    yield lookups


def _loop_lag_metrics(monitor: LoopLagMonitor | None) -> Iterator[Metric]:
    """How late the event loop woke, sampled every 50 ms: anything that blocks
    the loop delays every RPC at once, and shows up here first."""
    if monitor is None:
        return
    lag = monitor.snapshot()
    pairs = zip(LAG_BUCKETS, lag.bucket_counts, strict=True)
    buckets = [(str(bound), float(n)) for bound, n in pairs]
    buckets.append(("+Inf", float(lag.samples)))
    yield HistogramMetricFamily(
        "nexus_event_loop_lag_seconds",
        "How late the event loop woke from a 50 ms sleep.",
        buckets=buckets,
        sum_value=lag.total_seconds,
    )
    yield GaugeMetricFamily(
        "nexus_event_loop_lag_max_seconds",
        "The worst event-loop delay since start.",
        value=lag.max_seconds,
    )


def _watch_metrics(events: EventBroadcaster | None) -> Iterator[Metric]:
    """The WatchExtractions cap, read off the broadcaster (plain ints: a read
    from the scrape thread needs no lock)."""
    if events is None:  # a stand-in App without one
        return
    yield GaugeMetricFamily(
        "nexus_watch_streams",
        "WatchExtractions streams open now (each holds one of --max-watch-streams).",
        value=events.watchers,
    )
    yield GaugeMetricFamily(
        "nexus_watch_streams_limit",
        "--max-watch-streams: WatchExtractions streams allowed at once (0: no limit).",
        value=max(0, events.max_watchers),
    )
    yield CounterMetricFamily(
        "nexus_watch_streams_refused",
        "WatchExtractions calls refused with RESOURCE_EXHAUSTED at --max-watch-streams.",
        value=events.refused,
    )


def _worker_counts(workers: Iterable[object]) -> dict[str, tuple[int, int]]:
    counts: dict[str, tuple[int, int]] = {}
    for worker in list(workers):
        kind = str(getattr(worker, "kind", "unknown"))
        failed, done = counts.get(kind, (0, 0))
        counts[kind] = (
            failed + int(getattr(worker, "failures", 0)),
            done + int(getattr(worker, "completed", 0)),
        )
    return counts


class CombinedObserver(RequestObserver):
    """Fans every observer call out to several observers."""

    def __init__(self, *observers: RequestObserver) -> None:
        self._observers = observers

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        for o in self._observers:
            o.observe(method, code, seconds)

    def stream_started(self, method: str) -> None:
        for o in self._observers:
            o.stream_started(method)

    def stream_ended(self, method: str) -> None:
        for o in self._observers:
            o.stream_ended(method)


def combine(*observers: RequestObserver | None) -> RequestObserver | None:
    present = [o for o in observers if o is not None]
    if len(present) <= 1:
        return present[0] if present else None
    return CombinedObserver(*present)


def split_host_port(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--metrics-listen: expected host:port, got {listen!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


@dataclass
class MetricsServer:
    """The HTTP endpoint serving ``/metrics`` from a daemon thread."""

    metrics: Metrics
    httpd: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def start_metrics_server(listen: str, metrics: Metrics) -> MetricsServer:
    """Serve ``metrics`` on ``listen`` (host:port; port 0 picks one); call on the loop."""
    host, port = split_host_port(listen)
    if metrics.jobs is not None:
        metrics.jobs.bind(asyncio.get_running_loop())
    httpd, thread = start_http_server(port, host, registry=metrics.registry)
    server = MetricsServer(metrics, httpd, thread)
    log.info("metrics on http://%s:%d/metrics", host, server.port)
    return server
