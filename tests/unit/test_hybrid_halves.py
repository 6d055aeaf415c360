"""Hybrid search runs its candidate paths at once (domain/retrieval/pipeline.py,
``Engine._gather``): the primary path (keywords) beside the others, a later
path that is UNAVAILABLE is left out and reported, and any other failure ends
the search with its own error. The paths here are stand-ins: no database."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.domain.retrieval.call import Call, Candidate, Ranked
from nexus_grpc.domain.retrieval.pipeline import Engine, Path, Recipe
from nexus_grpc.errors import InvalidArgument, Unavailable


class Scripted(Path):
    def __init__(self, source: SearchSource, find) -> None:
        self.source = source  # type: ignore[misc]
        self._find = find

    def temperature(self, engine: Engine[Any]) -> float:
        return 1.0

    async def find(self, engine: Engine[Any], call: Call, n: int) -> Ranked:
        return await self._find()


class Kind:
    document: ClassVar = None


def engine_of(*paths: Path) -> Engine[Any]:
    recipe = Recipe(Kind(), paths, (), candidates=3)  # type: ignore[arg-type]
    return Engine(recipe, None, None, None)  # type: ignore[arg-type]


def call() -> Call:
    return Call("q", 5, SearchMode.HYBRID, None)


async def gathered(*paths: Path) -> Call:
    c = call()
    await engine_of(*paths)._gather(c, paths, 10)
    return c


async def test_both_paths_run_at_once():
    keyword_started = asyncio.Event()

    async def keyword():
        keyword_started.set()
        return [Candidate(1, 1.0, (SearchSource.KEYWORD,))]

    async def semantic():
        # Finishes only once the keyword path has started: paths run one
        # after the other would hang here.
        await asyncio.wait_for(keyword_started.wait(), 5)
        return [Candidate(2, 0.5, (SearchSource.SEMANTIC,))]

    c = await gathered(
        Scripted(SearchSource.KEYWORD, keyword), Scripted(SearchSource.SEMANTIC, semantic)
    )
    assert [x.key for x in c.found[SearchSource.KEYWORD]] == [1]
    assert [x.key for x in c.found[SearchSource.SEMANTIC]] == [2]


async def test_a_semantic_outage_degrades_to_keywords_and_says_so():
    async def semantic():
        raise Unavailable("embedder down")

    async def keyword():
        return [Candidate(1, 1.0, (SearchSource.KEYWORD,))]

    c = await gathered(
        Scripted(SearchSource.KEYWORD, keyword), Scripted(SearchSource.SEMANTIC, semantic)
    )
    assert c.found[SearchSource.SEMANTIC] == []
    assert c.degraded_reason == "embedder down"


async def test_a_failing_path_ends_the_other_and_keeps_its_error():
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow_keyword():
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return []

    async def broken_semantic():
        await asyncio.wait_for(started.wait(), 5)
        raise RuntimeError("index bug")

    with pytest.raises(RuntimeError, match="index bug"):
        await gathered(
            Scripted(SearchSource.KEYWORD, slow_keyword),
            Scripted(SearchSource.SEMANTIC, broken_semantic),
        )
    await asyncio.wait_for(cancelled.wait(), 5)

    async def bad_keyword():
        raise InvalidArgument("query is empty")

    async def semantic():
        return []

    with pytest.raises(InvalidArgument, match="query is empty"):  # not wrapped in a group
        await gathered(
            Scripted(SearchSource.KEYWORD, bad_keyword), Scripted(SearchSource.SEMANTIC, semantic)
        )
