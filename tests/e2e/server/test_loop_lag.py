"""The loop-lag monitor sees a blocked loop, and a server reports its own
monitor in the service status.

Its histogram's buckets, given lags by hand, are tested in
tests/unit/test_server_runtime.py; its other counts and the status made of
them (the worst lag in milliseconds, one more wake-up over 100 ms for a held
loop) in tests/unit/test_runtime_loop_lag.py."""

from __future__ import annotations

import time

from nexus_grpc.api import convert
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.runtime.loop_lag import LAG_BUCKETS, LoopLagMonitor
from tests.support import wait_until


async def _at_least(monitor: LoopLagMonitor, samples: int = 0, max_seconds: float = 0.0) -> bool:
    snap = monitor.snapshot()
    return snap.samples >= samples and snap.max_seconds >= max_seconds


async def test_a_blocking_call_on_the_loop_shows_as_lag():
    monitor = LoopLagMonitor(interval=0.01)
    monitor.start()
    try:
        await wait_until(lambda: _at_least(monitor, samples=3))
        assert monitor.snapshot().max_seconds < 0.2
        time.sleep(0.3)  # noqa: ASYNC251 -- the fault under test: the loop itself is held
        await wait_until(lambda: _at_least(monitor, max_seconds=0.25))
    finally:
        await monitor.stop()
    snap = monitor.snapshot()
    assert snap.bucket_counts[LAG_BUCKETS.index(0.1)] < snap.samples  # one sample was > 100 ms


async def test_service_status_reports_the_servers_own_monitor(harness):
    monitor = harness.app.loop_lag
    await wait_until(lambda: _at_least(monitor, samples=2))
    before = convert.event_loop(monitor.snapshot())
    status = (
        await harness.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
    ).event_loop
    after = convert.event_loop(monitor.snapshot())
    # The monitor goes on ticking while the call is answered: the status holds
    # what this server's monitor had counted by then.
    assert 2 <= before.samples <= status.samples <= after.samples
    assert before.max_lag_ms <= status.max_lag_ms <= after.max_lag_ms
    assert before.over_100ms <= status.over_100ms <= after.over_100ms
