"""The load loop's arithmetic (loadtest/loop.py), given the calls it recorded: medians,
ratios and percentiles, a recorder's summary in milliseconds, failures by status code,
an open loop's schedule kept or missed, the progress line.

(The loop driving calls, with its clock, workers and warm-up:
tests/e2e/loadtest/test_loop.py.)"""

from __future__ import annotations

import random

import grpc
import grpc.aio
import pytest

from nexus_grpc.loadtest import loop
from nexus_grpc.loadtest.loop import (
    Load,
    OpRecorder,
    Recorder,
    Schedule,
    code_name,
    median,
    percentile,
    ratio,
    single,
)


def test_median_ratio_and_percentile():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([]) == 0.0
    assert ratio(3.0, 4.0) == 0.75
    assert ratio(3.0, 0.0) == 0.0  # a baseline that made no call
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def test_a_summary_is_in_milliseconds_over_the_successes_with_failures_by_code():
    rec = Recorder()
    for latency in (0.004, 0.001, 0.003, 0.002):
        rec.record("op", latency, None)
    rec.record("op", 9.0, "UNAVAILABLE")
    rec.record("op", 9.0, "CLIENT_ValueError")
    rec.record("op", 9.0, "UNAVAILABLE")
    assert (rec.count, rec.errors) == (7, 3)
    stats = rec.ops["op"].summary("op", 2.0, streaming=False)
    assert (stats.count, stats.ok, stats.rps) == (7, 4, 3.5)
    # Sorted by code, so two runs print their errors alike.
    assert list(stats.errors.items()) == [("CLIENT_ValueError", 1), ("UNAVAILABLE", 2)]
    assert stats.min_ms == pytest.approx(1.0) and stats.max_ms == pytest.approx(4.0)
    assert stats.p50_ms == pytest.approx(2.0) and stats.p99_ms == pytest.approx(4.0)
    assert stats.mean_ms == pytest.approx(2.5)
    # Not streaming: no first-item figures at all.
    assert (stats.first_item_count, stats.first_item_p50_ms) == (None, None)


def test_a_streaming_summary_has_first_item_figures_of_the_calls_that_had_one():
    rec = OpRecorder()
    nothing = rec.summary("search", 1.0, streaming=True)
    assert (nothing.count, nothing.p50_ms, nothing.rps) == (0, 0.0, 0.0)
    assert (nothing.first_item_count, nothing.first_item_p50_ms) == (0, None)
    recorder = Recorder()
    recorder.record("search", 0.010, None, first=0.002)
    recorder.record("search", 0.020, None)  # no hit: no first item
    recorder.record("search", 0.030, "DEADLINE_EXCEEDED", first=0.001)  # a failure's is not kept
    stats = recorder.ops["search"].summary("search", 0.0, streaming=True)
    assert stats.rps == 0.0  # no elapsed time: no rate rather than a division by zero
    assert stats.first_item_count == 1
    assert stats.first_item_p50_ms == pytest.approx(2.0)
    assert stats.first_item_p99_ms == pytest.approx(2.0)


def test_the_total_is_every_ops_calls_together():
    rec = Recorder()
    rec.record("create", 0.001, None)
    rec.record("search", 0.003, None, first=0.002)
    rec.record("search", 0.5, "NOT_FOUND")
    rec.record("watch", 0.5, "NOT_FOUND")
    load = Load(rec, 4.0)
    stats = load.stats()
    assert stats.name == "total"
    assert (stats.count, stats.ok, stats.errors, stats.rps) == (4, 2, {"NOT_FOUND": 2}, 1.0)
    assert stats.max_ms == pytest.approx(3.0)
    assert load.stats("mixed", streaming=True).first_item_count == 1
    # Each op keeps its own calls.
    assert {op: r.count for op, r in rec.ops.items()} == {"create": 1, "search": 2, "watch": 1}


def test_a_schedule_is_kept_when_its_share_of_calls_started_in_time():
    assert Schedule(scheduled=50, started_in_window=45).kept(0.9)
    assert not Schedule(scheduled=50, started_in_window=44).kept(0.9)
    assert Schedule().kept(0.9)  # nothing scheduled: nothing missed


def test_a_failed_call_is_named_by_its_status_code_or_its_type():
    refused = grpc.aio.AioRpcError(
        grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.aio.Metadata(), grpc.aio.Metadata(), "busy"
    )
    assert code_name(refused) == "RESOURCE_EXHAUSTED"
    assert code_name(TimeoutError()) == "CLIENT_TimeoutError"


def test_single_gives_every_worker_the_same_call():
    async def call(rng: random.Random) -> None:
        return None

    picks = single("op", call)
    rng = random.Random(0)
    assert picks(0)(rng) == picks(7)(rng) == ("op", call)


def test_the_progress_line_counts_and_names_errors_only_when_there_are_some():
    assert loop._progress_line("run", 2.0, 120, 60.0, 0) == (
        "    run    2.0s        120 requests       60.0 rps"
    )
    assert loop._progress_line("warmup", 0.5, 3, 6.0, 2).endswith("6.0 rps  2 errors")
