"""The loop-lag monitor's counts and the service status made of them, given lags
by hand (runtime/loop_lag.py, api/convert.event_loop): a wake-up that came early
counts as no lag, a lag past the last bound is only in the count, the total and
the worst are kept, and the status reports the samples, the worst lag in
milliseconds and the wake-ups over 100 ms. The cumulative buckets themselves are
tested in tests/unit/test_server_runtime.py.

What stays in tests/e2e/server/test_loop_lag.py: the ticker seeing a loop held
by a blocking call, and a server's GetServiceStatus reading its own monitor."""

from __future__ import annotations

from nexus_grpc.api.convert import event_loop
from nexus_grpc.runtime.loop_lag import LAG_BUCKETS, LoopLagMonitor


def monitor_of(*lags: float) -> LoopLagMonitor:
    monitor = LoopLagMonitor()
    for lag in lags:
        monitor.record(lag)
    return monitor


def test_a_wake_up_that_came_early_counts_as_no_lag():
    snap = monitor_of(-0.002).snapshot()
    assert snap.samples == 1
    assert snap.max_seconds == 0.0 and snap.total_seconds == 0.0
    assert snap.bucket_counts[0] == 1  # at or under the first bound, not below the histogram


def test_a_lag_past_the_last_bound_is_counted_but_in_no_bucket():
    snap = monitor_of(0.003, 7.0).snapshot()
    assert snap.samples == 2
    assert snap.bucket_counts[LAG_BUCKETS.index(5.0)] == 1  # the +Inf bucket is the count
    assert snap.max_seconds == 7.0


def test_the_total_and_the_worst_lag_are_kept():
    snap = monitor_of(0.01, 0.2, 0.05).snapshot()
    assert abs(snap.total_seconds - 0.26) < 1e-12
    assert snap.max_seconds == 0.2


def test_a_lag_on_a_bound_is_in_that_bucket():
    snap = monitor_of(0.1).snapshot()
    by_bound = dict(zip(LAG_BUCKETS, snap.bucket_counts, strict=True))
    assert by_bound[0.05] == 0 and by_bound[0.1] == 1


def test_the_service_status_reports_samples_the_worst_lag_and_those_over_100ms():
    status = event_loop(monitor_of(0.002, 0.1, 0.3, 0.02).snapshot())
    assert status.samples == 4
    assert abs(status.max_lag_ms - 300.0) < 1e-9
    assert status.over_100ms == 1  # 100 ms itself is not over


def test_one_more_held_loop_is_one_more_wake_up_over_100ms():
    monitor = monitor_of(0.002, 0.003)
    before = event_loop(monitor.snapshot())
    monitor.record(0.31)
    after = event_loop(monitor.snapshot())
    assert before.over_100ms == 0
    assert after.over_100ms == before.over_100ms + 1
    assert after.max_lag_ms >= 250
    assert after.samples == before.samples + 1


def test_no_monitor_is_an_empty_status():
    status = event_loop(None)
    assert (status.samples, status.max_lag_ms, status.over_100ms) == (0, 0.0, 0)
