"""A running harness's /metrics scraped as Prometheus would, for the tests
that read what a whole server counts: ``scrape`` reads every sample of the
harness's metrics port, keyed by name and sorted labels, and ``sample`` picks
one out. Not a test module: the metrics tests
(tests/e2e/server/test_metrics.py), the reranked search's
(tests/e2e/service/test_search_rerank.py) and the query cache's
(tests/integration/embedding/test_query_cache.py) all read the counters this
way."""

from __future__ import annotations

import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def get_metrics_page(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.headers["Content-Type"], response.read().decode()


async def scrape(h) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample on /metrics, keyed by (name, sorted labels)."""
    assert h.running.metrics is not None
    status, content_type, text = await asyncio.to_thread(
        get_metrics_page, f"http://127.0.0.1:{h.running.metrics.port}/metrics"
    )
    assert status == 200 and content_type.startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))
