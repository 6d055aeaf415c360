"""The shared load loop, driven by calls that need no server: what it records is exact.

The arithmetic of what it recorded (medians, percentiles, summaries, a schedule kept
or missed), given the calls rather than timed: tests/unit/test_loadtest_loop_arithmetic.py."""

from __future__ import annotations

import asyncio
import random

import pytest

from nexus_grpc.loadtest.loop import LoadError, drive, single


async def test_closed_loop_records_every_call_and_counts_failures_by_kind():
    calls = 0

    async def call(rng: random.Random) -> None:
        nonlocal calls
        calls += 1
        n = calls
        await asyncio.sleep(0.005)
        if n % 4 == 0:
            raise ValueError("every fourth call fails")

    load = await drive(single("op", call), 3, 0.3)
    stats = load.stats()
    # Every call the workers made is in the result, the failures by kind.
    assert stats.count == calls > 10
    assert stats.errors == {"CLIENT_ValueError": calls // 4}
    assert stats.ok == calls - calls // 4
    assert 5 <= stats.p50_ms <= stats.p99_ms
    assert stats.rps == pytest.approx(calls / load.elapsed)


async def test_each_worker_draws_from_its_own_seeded_rng():
    seen: dict[int, list[float]] = {0: [], 1: []}

    def picks(index: int):
        async def call(rng: random.Random) -> None:
            seen[index].append(rng.random())
            await asyncio.sleep(0.01)

        return lambda _rng: ("op", call)

    await drive(picks, 2, 0.1, seed=0)
    # Worker n's stream is random.Random(n) with seed 0: make bench's queries stay
    # the same sequence run after run.
    for index, values in seen.items():
        expected = random.Random(index)
        assert values and values == [expected.random() for _ in values]


async def test_the_warm_up_is_not_measured():
    async def call(rng: random.Random) -> None:
        await asyncio.sleep(0.01)

    load = await drive(single("op", call), 1, 0.2, warmup=0.2)
    # About 20 calls in the measured 0.2 s, not the 40 of warm-up and run together.
    assert 5 <= load.stats().count <= 25


async def test_a_worker_that_breaks_is_an_error_not_a_figure():
    def picks(index: int):
        def pick(rng: random.Random):
            raise RuntimeError("bad pick")

        return pick

    with pytest.raises(LoadError, match="bad pick"):
        await drive(picks, 2, 0.1)


async def test_an_open_loop_says_how_well_it_kept_its_schedule():
    async def call(rng: random.Random) -> None:
        await asyncio.sleep(0.05)

    # Two workers of 50 ms calls start at most 40 a second: 100 asked.
    behind = await drive(single("op", call), 2, 0.5, rps=100, grace=5.0)
    assert behind.schedule is not None
    assert behind.schedule.scheduled == 50
    assert behind.schedule.started_in_window <= 25
    assert not behind.schedule.kept(0.9)
    # The later a call was scheduled, the longer it waited for a worker.
    assert max(behind.schedule.lateness) > 0.2
    # Eight workers start 40 a second of them on time.
    on_time = await drive(single("op", call), 8, 0.5, rps=40, grace=5.0)
    assert on_time.schedule is not None and on_time.schedule.scheduled == 20
    assert on_time.schedule.kept(0.9)
    # A closed loop has no schedule.
    assert (await drive(single("op", call), 1, 0.1)).schedule is None
