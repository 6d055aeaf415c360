"""Hybrid search runs its keyword and semantic halves at once."""

from __future__ import annotations

import asyncio

import pytest

from nexus_grpc.domain.ranking import hybrid_halves
from nexus_grpc.errors import InvalidArgument, Unavailable


async def test_both_halves_run_at_once():
    keyword_started = asyncio.Event()

    async def keyword():
        keyword_started.set()
        return ["k"]

    async def semantic():
        # Finishes only once the keyword half has started: sequential halves would hang.
        await asyncio.wait_for(keyword_started.wait(), 5)
        return ["s"]

    assert await hybrid_halves(keyword(), semantic(), None) == (["k"], ["s"])


async def test_a_semantic_outage_degrades_to_keywords_and_says_so():
    said: list[str] = []

    async def semantic():
        raise Unavailable("embedder down")

    async def keyword():
        return ["k"]

    assert await hybrid_halves(keyword(), semantic(), said.append) == (["k"], [])
    assert said == ["embedder down"]


async def test_a_failing_half_ends_the_other_and_keeps_its_error():
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow_keyword():
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def broken_semantic():
        await asyncio.wait_for(started.wait(), 5)
        raise RuntimeError("index bug")

    with pytest.raises(RuntimeError, match="index bug"):
        await hybrid_halves(slow_keyword(), broken_semantic(), None)
    await asyncio.wait_for(cancelled.wait(), 5)

    async def bad_keyword():
        raise InvalidArgument("query is empty")

    async def semantic():
        return []

    with pytest.raises(InvalidArgument, match="query is empty"):  # not wrapped in a group
        await hybrid_halves(bad_keyword(), semantic(), None)
