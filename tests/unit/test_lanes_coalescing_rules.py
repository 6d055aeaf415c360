"""The query lane's rules left over from tests/unit/test_embedding_coalesce.py
(embedding/coalesce.py), on a stand-in model that records each batch: a batch
whose callers all went away is never run, and closing the lane cancels the
batch it runs and the callers waiting for the next one.

Coalescing itself (queries arriving during a run sharing the next batch, two
lanes, a cancelled caller, a failed run) is tests/unit/test_embedding_coalesce.py's."""

from __future__ import annotations

import asyncio

import pytest

from nexus_grpc.embedding.coalesce import CoalescingLane


class GatedModel:
    """Records each batch; a run waits for ``gate``; ``cancelled`` is set when
    a run is cancelled."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def run(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        self.started.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return [[float(len(t))] for t in texts]


async def next_turn() -> None:
    """One turn of the event loop (no time passes): tasks just created run
    up to their first wait."""
    turn = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(turn.set_result, None)
    await turn


async def test_a_batch_whose_callers_all_went_away_is_never_run() -> None:
    model = GatedModel()
    lane = CoalescingLane(model.run, max_batch=8)
    first = asyncio.create_task(lane.embed("first"))
    await model.started.wait()
    gone = [asyncio.create_task(lane.embed(t)) for t in ("one", "two")]
    await next_turn()
    for task in gone:
        task.cancel()
    model.gate.set()
    assert await first == [5.0]
    assert model.batches == [["first"]] and lane.batches == 1
    assert all(task.cancelled() for task in gone)
    # The lane is idle, not stuck: the next text runs at once.
    assert await lane.embed("later") == [5.0]
    assert model.batches == [["first"], ["later"]]


async def test_closing_the_lane_cancels_its_run_and_its_waiting_callers() -> None:
    model = GatedModel()
    lane = CoalescingLane(model.run, max_batch=8)
    running = asyncio.create_task(lane.embed("running"))
    await model.started.wait()
    waiting = asyncio.create_task(lane.embed("waiting"))
    await next_turn()
    await lane.close()
    assert model.cancelled.is_set()
    for task in (running, waiting):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert model.batches == [["running"]]  # the waiting text never ran
