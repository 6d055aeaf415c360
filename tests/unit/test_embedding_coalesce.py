"""Concurrent single-text embeds share model runs (embedding/coalesce.py),
on a stand-in model that records each batch: no model is loaded.

That the real MiniLM model answers coalesced queries as it answers single
ones, in fewer runs, is tests/integration/embedding/test_embedding_coalesce.py's."""

from __future__ import annotations

import asyncio

import pytest

from nexus_grpc.embedding.coalesce import CoalescingLane


class GatedModel:
    """Records each batch; the first run waits for a gate so the rest pile up."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.fail_on: str | None = None

    async def run(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        self.started.set()
        await self.gate.wait()
        if self.fail_on in texts:
            raise RuntimeError(f"model failed on {self.fail_on}")
        return [[float(len(t)), float(i)] for i, t in enumerate(texts)]


async def test_queries_arriving_during_a_run_share_the_next_batch():
    model = GatedModel()
    lane = CoalescingLane(model.run, max_batch=8)
    first = asyncio.create_task(lane.embed("a"))
    await model.started.wait()
    rest = [asyncio.create_task(lane.embed("b" * n)) for n in range(1, 11)]
    await asyncio.sleep(0)  # let them enqueue behind the running batch
    model.gate.set()
    assert await first == [1.0, 0.0]
    results = await asyncio.gather(*rest)
    # Each caller gets the vector of its own text, in its own order.
    assert [r[0] for r in results] == [float(n) for n in range(1, 11)]
    assert [len(b) for b in model.batches] == [1, 8, 2]


async def test_two_lanes_run_two_batches_at_once_and_still_coalesce():
    """The inline embedding of creates (domain/inline_vectors.py) uses as many
    lanes as the model has threads: a second text starts at once beside the
    first; the rest wait and share the next batches."""
    model = GatedModel()
    lane = CoalescingLane(model.run, max_batch=8, lanes=2)
    first = asyncio.create_task(lane.embed("a"))
    await model.started.wait()
    second = asyncio.create_task(lane.embed("bb"))
    for _ in range(3):  # the caller, then its drain, get to run
        await asyncio.sleep(0)
    # The second did not wait for the first batch: both run.
    assert [len(b) for b in model.batches] == [1, 1]
    rest = [asyncio.create_task(lane.embed("c" * n)) for n in range(1, 11)]
    for _ in range(3):
        await asyncio.sleep(0)
    model.gate.set()
    assert (await first)[0] == 1.0 and (await second)[0] == 2.0
    results = await asyncio.gather(*rest)
    assert [r[0] for r in results] == [float(n) for n in range(1, 11)]
    assert sorted(len(b) for b in model.batches) == [1, 1, 2, 8]
    # Idle again: the next text starts at once.
    model.batches.clear()
    assert (await lane.embed("dddd"))[0] == 4.0
    assert [len(b) for b in model.batches] == [1]


async def test_a_cancelled_caller_does_not_strand_the_others():
    model = GatedModel()
    lane = CoalescingLane(model.run, max_batch=8)
    first = asyncio.create_task(lane.embed("first"))
    await model.started.wait()
    doomed = asyncio.create_task(lane.embed("doomed"))
    kept = asyncio.create_task(lane.embed("kept"))
    await asyncio.sleep(0)
    doomed.cancel()
    first.cancel()  # the caller whose call started the drain goes away mid-run
    model.gate.set()
    assert (await kept)[0] == float(len("kept"))
    with pytest.raises(asyncio.CancelledError):
        await doomed
    assert ["doomed"] not in model.batches and ["kept"] in model.batches


async def test_a_failed_run_fails_its_callers_and_the_lane_keeps_going():
    model = GatedModel()
    model.fail_on = "bad"
    lane = CoalescingLane(model.run, max_batch=8)
    first = asyncio.create_task(lane.embed("x"))
    await model.started.wait()
    together = [asyncio.create_task(lane.embed(t)) for t in ("bad", "ok")]
    await asyncio.sleep(0)
    model.gate.set()
    await first
    for task in together:
        with pytest.raises(RuntimeError, match="model failed on bad"):
            await task
    assert (await lane.embed("later"))[0] == float(len("later"))
    await lane.close()
