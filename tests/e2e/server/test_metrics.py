"""Prometheus metrics on their own HTTP port, scraped as Prometheus would from a
whole server: the interceptor's calls counted and timed by their code (a
refused one too), an open stream in the gauge, the jobs read from the server's
store and its workers' counters, the loop lag, two servers keeping their own
metrics and a stopped endpoint refusing the scrape.

How ``--metrics-listen`` is read is a pure function, tested in
tests/unit/test_server_settings.py. What each family reports from the values it
is given (the histograms' buckets, the depths, ages and dead letters by kind, the
counters summed by kind, the last depths when a read cannot be made, the
optional families, observers combined) is tested in
tests/unit/test_metrics_rules.py; how the stores compute a queue's depth and age
in tests/integration/store/test_repository_contract.py."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error

import grpc
import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.metrics_scrape import get_metrics_page, sample, scrape
from tests.support import start_harness, wait_until

CREATE_SESSION = "/nexus.memory.v1.MemoryService/CreateSession"
WATCH = "/nexus.graph.v1.GraphService/WatchExtractions"


@pytest.fixture
async def metered(tmp_path):
    h = await start_harness(tmp_path / "data", metrics_listen="127.0.0.1:0")
    yield h
    await h.close()


async def test_rpc_counter_and_latency_histogram_by_method_and_code(metered):
    await metered.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(name="m"))
    )
    with pytest.raises(grpc.aio.AioRpcError):
        await metered.memory.GetSession(memory_pb2.GetSessionRequest(id=999))
    samples = await scrape(metered)
    assert sample(samples, "nexus_rpc_requests_total", method=CREATE_SESSION, code="OK") == 1
    get_session = "/nexus.memory.v1.MemoryService/GetSession"
    assert sample(samples, "nexus_rpc_requests_total", method=get_session, code="NOT_FOUND") == 1
    count = sample(samples, "nexus_rpc_duration_seconds_count", method=CREATE_SESSION, code="OK")
    assert count == 1
    assert sample(samples, "nexus_rpc_duration_seconds_sum", method=CREATE_SESSION, code="OK") > 0


async def test_queue_depth_oldest_age_and_worker_counters(metered):
    session = await metered.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(name="m"))
    )
    queued_after = time.time()  # the extraction job is queued by the call below
    await metered.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message="hello there")
    )

    async def extraction_waiting_and_indexed():
        samples = await scrape(metered)
        depth = sample(samples, "nexus_job_queue_depth", kind="extract:episode")
        done = sample(samples, "nexus_job_completed_total", kind="index:episodes")
        # The depths are read from the database at scrape time, the counters
        # kept in the process: a scrape whose read timed out on a loaded
        # machine reports the last depths beside the live counters. The
        # indexing queue must be seen empty too (or the wait times out).
        indexed = sample(samples, "nexus_job_queue_depth", kind="index:episodes")
        ready = depth and depth >= 1 and done and done >= 1 and indexed == 0
        return samples if ready else None

    # No Ollama is configured, so extraction waits in the queue while indexing completes.
    samples = await wait_until(extraction_waiting_and_indexed)
    read_by = time.time()
    # The waiting job's age, read from the store: never more than the time
    # since it could have been queued.
    age = sample(samples, "nexus_job_oldest_pending_age_seconds", kind="extract:episode")
    assert age is not None and 0 <= age <= read_by - queued_after
    assert sample(samples, "nexus_job_oldest_pending_age_seconds", kind="index:episodes") == 0
    assert sample(samples, "nexus_job_dead_letters", kind="extract:episode") == 0
    assert sample(samples, "nexus_job_failures_total", kind="index:episodes") == 0


async def test_stream_subscribers_gauge_follows_open_streams(metered):
    stream = metered.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest())

    async def subscribers(n: int):
        samples = await scrape(metered)
        return sample(samples, "nexus_stream_subscribers", method=WATCH) == n

    reader = asyncio.create_task(anext(aiter(stream), None))
    await wait_until(lambda: subscribers(1))
    stream.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    await wait_until(lambda: subscribers(0))
    samples = await scrape(metered)
    finished = [
        v for (name, labels), v in samples.items()
        if name == "nexus_rpc_requests_total" and ("method", WATCH) in labels
    ]  # fmt: skip
    # The code is whatever ServiceInterceptor saw: a client cancel currently reads as OK.
    assert finished == [1]


async def test_two_servers_keep_their_own_metrics_and_stop_serving_them(tmp_path, metered):
    other = await start_harness(tmp_path / "other", metrics_listen="127.0.0.1:0")
    port = other.running.metrics.port
    try:
        await other.memory.CreateSession(memory_pb2.CreateSessionRequest())
        assert sample(await scrape(other), "nexus_rpc_requests_total",
                      method=CREATE_SESSION, code="OK") == 1  # fmt: skip
        assert (
            sample(await scrape(metered), "nexus_rpc_requests_total", method=CREATE_SESSION,
                   code="OK") is None
        )  # fmt: skip
    finally:
        await other.close()
    with pytest.raises(urllib.error.URLError):
        await asyncio.to_thread(get_metrics_page, f"http://127.0.0.1:{port}/metrics")


async def test_refused_calls_are_counted(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": "k" * 24, "name": "svc", "users": ["a"]}]}))
    h = await start_harness(
        tmp_path / "data", metrics_listen="127.0.0.1:0", auth_keys_file=str(keys)
    )
    try:
        with pytest.raises(grpc.aio.AioRpcError):
            await h.memory.CreateSession(memory_pb2.CreateSessionRequest())
        samples = await scrape(h)
        assert (
            sample(samples, "nexus_rpc_requests_total", method=CREATE_SESSION,
                   code="UNAUTHENTICATED") == 1
        )  # fmt: skip
    finally:
        await h.close()


async def test_event_loop_lag_is_exported(metered):
    async def sampled():
        samples = await scrape(metered)
        count = sample(samples, "nexus_event_loop_lag_seconds_count")
        return samples if count and count >= 2 else None

    samples = await wait_until(sampled)
    assert 0 <= sample(samples, "nexus_event_loop_lag_max_seconds") < 5
