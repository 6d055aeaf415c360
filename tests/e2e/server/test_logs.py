"""Log records are written by their own thread: a stuck stderr never stalls the caller."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from nexus_grpc.observability import logs
from nexus_grpc.rpc.requests import request_id_var


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
