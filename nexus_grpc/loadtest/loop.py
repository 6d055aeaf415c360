"""The one load loop: ``concurrency`` workers calling a server for ``duration`` seconds.

``nexus-grpc bench`` (``run_bench``), ``make bench`` (bench/run_benchmarks.py) and
bench/profile_search.py all drive the server through ``drive()``, so a figure means
the same thing wherever it is printed.

Closed loop by default: each worker fires back to back.  With ``rps`` it is an open
loop: arrivals are scheduled every ``1/rps`` seconds and handed to the workers, and
each latency is measured from the arrival's *scheduled* time, so a slow server is
charged for the queueing it causes (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import grpc
import grpc.aio

__all__ = [
    "Call",
    "Load",
    "LoadError",
    "OpRecorder",
    "OpStats",
    "Pick",
    "Recorder",
    "Schedule",
    "code_name",
    "drive",
    "median",
    "percentile",
    "ratio",
    "single",
]

#: One call to the server, drawing what it sends from the worker's ``rng``.  It
#: returns the ``perf_counter`` time its first streamed item arrived, or None.
Call = Callable[[random.Random], Awaitable[float | None]]
#: A worker's choice of the next call: (op name, call).
Pick = Callable[[random.Random], tuple[str, Call]]


class LoadError(Exception):
    """A worker died of something other than a failed call (a bug in a call function)."""


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = math.ceil(p / 100.0 * len(sorted_values))
    return sorted_values[min(len(sorted_values) - 1, max(0, rank - 1))]


def median(values: Sequence[float]) -> float:
    """The median (mean of the middle two for an even count; 0 when empty)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def ratio(value: float, base: float) -> float:
    """``value / base``, 0 when there is no base (a run that made no call)."""
    return value / base if base else 0.0


@dataclass
class OpStats:
    """Latency and status summary of one op (all ops of a single-RPC run share one)."""

    name: str
    count: int = 0
    ok: int = 0
    rps: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    mean_ms: float = 0.0
    min_ms: float = 0.0
    first_item_p50_ms: float | None = None
    first_item_p99_ms: float | None = None
    first_item_count: int | None = None


class OpRecorder:
    """Every finished call of one op: latencies of the successes, errors by code."""

    __slots__ = ("count", "errors", "first", "latencies")

    def __init__(self) -> None:
        self.count = 0
        self.latencies: list[float] = []
        self.first: list[float] = []
        self.errors: dict[str, int] = {}

    def add(self, other: OpRecorder) -> None:
        self.count += other.count
        self.latencies.extend(other.latencies)
        self.first.extend(other.first)
        for code, n in other.errors.items():
            self.errors[code] = self.errors.get(code, 0) + n

    def summary(self, name: str, elapsed: float, streaming: bool) -> OpStats:
        lat = sorted(self.latencies)
        stats = OpStats(
            name=name,
            count=self.count,
            ok=len(lat),
            rps=self.count / elapsed if elapsed > 0 else 0.0,
            errors=dict(sorted(self.errors.items())),
        )
        if lat:
            stats.p50_ms = percentile(lat, 50) * 1e3
            stats.p95_ms = percentile(lat, 95) * 1e3
            stats.p99_ms = percentile(lat, 99) * 1e3
            stats.max_ms = lat[-1] * 1e3
            stats.min_ms = lat[0] * 1e3
            stats.mean_ms = sum(lat) / len(lat) * 1e3
        if streaming:
            first = sorted(self.first)
            stats.first_item_count = len(first)
            if first:
                stats.first_item_p50_ms = percentile(first, 50) * 1e3
                stats.first_item_p99_ms = percentile(first, 99) * 1e3
        return stats


class Recorder:
    """The calls of one phase (warm-up or measured), by op."""

    def __init__(self) -> None:
        self.ops: dict[str, OpRecorder] = {}
        self.count = 0
        self.errors = 0

    def record(self, op: str, latency: float, code: str | None, first: float | None = None) -> None:
        rec = self.ops.get(op)
        if rec is None:
            rec = self.ops[op] = OpRecorder()
        rec.count += 1
        self.count += 1
        if code is None:
            rec.latencies.append(latency)
            if first is not None:
                rec.first.append(first)
        else:
            rec.errors[code] = rec.errors.get(code, 0) + 1
            self.errors += 1

    def total(self) -> OpRecorder:
        """Every op's calls together."""
        out = OpRecorder()
        for rec in self.ops.values():
            out.add(rec)
        return out


@dataclass
class Schedule:
    """How an open loop kept its schedule over the measured window: the
    arrivals scheduled in it, how many of them a worker started before the
    window ended, and how late each started call began (seconds after its
    scheduled time: it waited for a free worker, or for the client's CPU)."""

    scheduled: int = 0
    started_in_window: int = 0
    lateness: list[float] = field(default_factory=list)

    def kept(self, share: float) -> bool:
        """Whether at least ``share`` of the scheduled arrivals started in time."""
        return self.started_in_window >= share * self.scheduled


@dataclass
class Load:
    """What one ``drive()`` measured: the calls after the warm-up, over ``elapsed`` s."""

    recorder: Recorder
    elapsed: float
    #: The open loop's schedule (None: a closed loop has none).
    schedule: Schedule | None = None

    def stats(self, name: str = "total", streaming: bool = False) -> OpStats:
        """Every op's calls summarised as one."""
        return self.recorder.total().summary(name, self.elapsed, streaming)


def code_name(exc: BaseException) -> str:
    """A failed call's status code name (``CLIENT_<type>`` when no status came back)."""
    if isinstance(exc, grpc.aio.AioRpcError):
        return exc.code().name
    return f"CLIENT_{type(exc).__name__}"


def single(name: str, call: Call) -> Callable[[int], Pick]:
    """Every worker makes the same call (the rng is left to the call alone)."""
    picked = (name, call)
    return lambda _index: lambda _rng: picked


async def drive(
    picks: Callable[[int], Pick],
    concurrency: int,
    duration: float,
    *,
    warmup: float = 0.0,
    rps: float | None = None,
    seed: int = 0,
    grace: float | None = None,
    progress: TextIO | None = None,
) -> Load:
    """Runs the load and returns what the measured phase recorded.

    ``picks(index)`` gives worker ``index`` its chooser of the next call; each
    worker draws from its own ``random.Random(seed * 100_003 + index)``.  A failed
    call is counted by status code and the worker goes on.  ``grace``: seconds past
    the end after which calls still running are cancelled (None: wait for them).
    """
    start = time.perf_counter()
    clock = _Clock(start, start + warmup, start + warmup + duration, 1.0 / rps if rps else 0.0)
    if rps:
        # Arrival k is due at start + k / rps: those due in [measure_from, end).
        first_k, end_k = math.ceil(warmup * rps), math.ceil((warmup + duration) * rps)
        clock.schedule = Schedule(scheduled=max(0, end_k - first_k))
    reporter = (
        asyncio.create_task(_progress(progress, clock.live)) if progress is not None else None
    )
    workers = [
        asyncio.create_task(_worker(clock, picks(i), random.Random(seed * 100_003 + i)))
        for i in range(concurrency)
    ]
    try:
        _done, pending = await asyncio.wait(
            workers, timeout=None if grace is None else warmup + duration + grace
        )
        for task in pending:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    finally:
        for task in workers:
            task.cancel()
        if reporter is not None:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
    elapsed = max(time.perf_counter() - clock.measure_from, duration)
    for task in workers:
        if not task.cancelled() and task.exception() is not None:
            raise LoadError(f"worker failed: {task.exception()!r}")
    return Load(clock.measured, elapsed, clock.schedule)


@dataclass
class _Clock:
    """When the run's phases begin and end, when each call starts, and which
    phase's recorder it counts in."""

    start: float
    measure_from: float
    end: float
    #: Seconds between arrivals under an open load (``rps``); 0 for a closed one.
    interval: float
    warm: Recorder = field(default_factory=Recorder)
    measured: Recorder = field(default_factory=Recorder)
    arrivals: Iterator[int] = field(default_factory=itertools.count)
    #: An open loop's schedule over the measured window (None: a closed loop has none).
    schedule: Schedule | None = None

    async def next_start(self) -> float | None:
        """When the next call begins (an open load waits for its arrival),
        or None once the run is over."""
        if self.interval:
            scheduled = self.start + next(self.arrivals) * self.interval
            if scheduled >= self.end:
                return None
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.schedule is not None and scheduled >= self.measure_from:
                started = time.perf_counter()
                self.schedule.lateness.append(max(0.0, started - scheduled))
                if started < self.end:
                    self.schedule.started_in_window += 1
            return scheduled
        began = time.perf_counter()
        return None if began >= self.end else began

    def recorder(self, began: float) -> Recorder:
        return self.measured if began >= self.measure_from else self.warm

    def live(self) -> tuple[str, float, Recorder]:
        now = time.perf_counter()
        if now < self.measure_from:
            return "warmup", now - self.start, self.warm
        return "run", now - self.measure_from, self.measured


async def _worker(clock: _Clock, pick: Pick, rng: random.Random) -> None:
    """One caller: the next call as soon as the last returns (or as it arrives)."""
    while (began := await clock.next_start()) is not None:
        op, fn = pick(rng)
        code: str | None = None
        first: float | None = None
        try:
            first = await fn(rng)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            code = code_name(exc)
        done = time.perf_counter()
        clock.recorder(began).record(
            op, done - began, code, None if first is None else first - began
        )


def _progress_line(phase: str, elapsed: float, count: int, rps: float, errors: int) -> str:
    line = f"{phase:>7} {elapsed:6.1f}s  {count:>9} requests  {rps:>9.1f} rps"
    if errors:
        line += f"  {errors} errors"
    return line


async def _progress(out: TextIO, live: Callable[[], tuple[str, float, Recorder]]) -> None:
    tty = out.isatty()
    last_count, last_time = 0, time.perf_counter()
    last_rec: Recorder | None = None
    try:
        while True:
            await asyncio.sleep(1.0)
            phase, elapsed, rec = live()
            now = time.perf_counter()
            if rec is not last_rec:  # a new phase: rate over its own time only
                last_rec, last_count = rec, 0
                last_time = max(last_time, now - elapsed)
            rps = (rec.count - last_count) / max(now - last_time, 1e-6)
            last_count, last_time = rec.count, now
            line = _progress_line(phase, elapsed, rec.count, rps, rec.errors)
            if tty:
                out.write("\r" + line + "\x1b[K")
            else:
                out.write(line + "\n")
            out.flush()
    finally:
        if tty and last_rec is not None:
            out.write("\n")
            out.flush()
