"""The loop-lag monitor sees a blocked loop, and reports it in the service status.

Its histogram's buckets, given lags by hand, are tested in
tests/unit/test_server_runtime.py."""

from __future__ import annotations

import time

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


async def test_service_status_reports_the_loop_lag(harness):
    monitor = harness.app.loop_lag
    await wait_until(lambda: _at_least(monitor, samples=2))
    before = (
        await harness.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
    ).event_loop
    assert before.samples >= 2
    time.sleep(0.3)  # noqa: ASYNC251 -- the fault under test: the server's loop is held
    await wait_until(lambda: _at_least(monitor, max_seconds=0.25))
    after = (await harness.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())).event_loop
    # The held loop shows in the status: its size, and one more late wake-up.
    assert after.max_lag_ms >= 250
    assert after.over_100ms >= before.over_100ms + 1
    assert after.samples > before.samples
