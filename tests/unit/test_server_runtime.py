"""The server's runtime helpers on their own: the deadline budget a dependency
is given, the loop-lag histogram's buckets, and the log writer's thread (a
stuck stderr never stalls the caller, the request id and traceback are taken
on the caller's side, a full queue drops and says how many), on an in-memory
stream.

What stays whole-server, in tests/e2e/server: the caller's deadline reaching
the servicer, the LLM client and the vector index (test_deadlines.py), a
blocked loop seen by the monitor and in the service status (test_loop_lag.py)."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from nexus_grpc.errors import DeadlineExceeded
from nexus_grpc.observability import logs
from nexus_grpc.rpc.requests import request_id_var
from nexus_grpc.runtime import deadlines
from nexus_grpc.runtime.loop_lag import LAG_BUCKETS, LoopLagMonitor


def test_budget_is_our_limit_cut_to_what_the_caller_has_left():
    assert deadlines.budget(30.0, "x") == 30.0  # no call in progress: our limit alone
    deadlines.start(2.0)
    assert 1.5 < deadlines.budget(30.0, "x") <= 2.0
    assert deadlines.budget(0.5, "x") == 0.5
    deadlines.start(-0.01)
    with pytest.raises(DeadlineExceeded, match="deadline passed before calling the thing"):
        deadlines.budget(30.0, "calling the thing")
    deadlines.start(None)
    assert deadlines.remaining() is None


def test_buckets_are_cumulative():
    monitor = LoopLagMonitor()
    for lag in (0.0005, 0.003, 0.003, 0.07, 3.0):
        monitor.record(lag)
    snap = monitor.snapshot()
    assert snap.samples == 5 and snap.max_seconds == 3.0
    by_bound = dict(zip(LAG_BUCKETS, snap.bucket_counts, strict=True))
    assert by_bound[0.001] == 1 and by_bound[0.005] == 3 and by_bound[0.1] == 4
    assert by_bound[5.0] == 5


# The log writer's thread ---------------------------------------------------------------


class HeldStream(io.StringIO):
    """A stderr whose writes wait until the test lets them through."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def write(self, s: str) -> int:
        self.waiting.set()
        self.gate.wait(30)
        return super().write(s)


@pytest.fixture
def held() -> Iterator[HeldStream]:
    stream = HeldStream()
    yield stream
    stream.gate.set()
    logs.stop()
    logging.getLogger().handlers[:] = []


def test_a_stuck_stderr_does_not_block_the_caller(held: HeldStream) -> None:
    logs.configure("INFO", "json", held)
    log = logging.getLogger("nexus_grpc.test")
    log.info("first")
    assert held.waiting.wait(10)  # the writer thread is now stuck in write()
    for i in range(50):
        log.info("more %d", i)  # returns at once: it only queues
    assert held.getvalue() == ""
    held.gate.set()
    logs.stop()  # writes out what was queued
    lines = [json.loads(line)["msg"] for line in held.getvalue().splitlines()]
    assert lines == ["first"] + [f"more {i}" for i in range(50)]


def test_request_id_and_traceback_are_taken_on_the_callers_side(held: HeldStream) -> None:
    held.gate.set()
    logs.configure("INFO", "json", held)
    token = request_id_var.set("req-42")
    try:
        raise ValueError("bad input")
    except ValueError:
        logging.getLogger("nexus_grpc.test").exception("it failed")
    finally:
        request_id_var.reset(token)
    logs.stop()
    [entry] = [json.loads(line) for line in held.getvalue().splitlines()]
    assert entry["request_id"] == "req-42"
    assert entry["msg"] == "it failed"
    assert "ValueError: bad input" in entry["exc"]


def test_a_full_queue_drops_and_says_how_many(
    held: HeldStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs, "QUEUE_LIMIT", 5)
    logs.configure("INFO", "text", held)
    log = logging.getLogger("nexus_grpc.test")
    log.info("r0")
    assert held.waiting.wait(10)  # r0 is being written; the queue holds 5 more
    for i in range(1, 9):
        log.info("r%d", i)
    held.gate.set()
    [front] = logging.getLogger().handlers
    front.queue.join()  # type: ignore[attr-defined]  # the writer has caught up
    log.info("after")
    logs.stop()
    out = held.getvalue()
    assert [f" r{i}\n" in out for i in range(9)] == [True] * 6 + [False] * 3
    assert out.index("3 log records were dropped") < out.index(" after\n")
