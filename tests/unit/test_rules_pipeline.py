"""The one dispatcher every search runs through (domain/retrieval/pipeline.py's
Engine), on a recipe of scripted paths and stages and the fakes' database:
a kind that opens to nothing runs no path; a lone path ranks the page, the
paths of a hybrid search the depth times the recipe's candidates (a stage
needing more raises the depth); the stages that read run in one read
transaction with the pure stages after them, the pure ones before them on
the loop; a stage that leaves nothing ends the search before any further
read or async step; a later path down is left out and reported, the first
one down fails the search.

The recipes' own stages are tested each in its file (test_rules_fusion_stage.py,
test_rules_search_stages.py, test_rerank_rules_stage.py); whole searches are
tests/unit/test_rules_entity_search.py's and test_rules_semantic_searches.py's.
"""

from __future__ import annotations

from typing import Any

import pytest

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.pipeline import AsyncStage, Engine, Path, Recipe, Stage
from nexus_grpc.errors import Unavailable
from tests.fakes import FakeDatabase

KW, SEM = SearchSource.KEYWORD, SearchSource.SEMANTIC


class Kind:
    def __init__(self, opens: bool = True) -> None:
        self.opens = opens

    async def open(self, engine: Any, call: Call) -> bool:
        call.scope = "scope"
        return self.opens

    def document(self, row: Any) -> str:
        return str(row)

    def hit(self, candidate: Candidate, call: Call) -> tuple[int, str]:
        return (candidate.key, call.degraded_reason)


class Found(Path):
    """A path that ranks ``keys`` (or fails with ``fault``), noting how many it was asked for."""

    source = KW

    def __init__(self, keys: list[int], fault: Exception | None = None) -> None:
        self.keys = keys
        self.fault = fault
        self.asked: list[int] = []

    def temperature(self, engine: Any) -> float:
        return 1.0

    async def find(self, engine: Any, call: Call, n: int) -> list[Candidate]:
        self.asked.append(n)
        if self.fault is not None:
            raise self.fault
        return [Candidate(k, 1.0, (self.source,)) for k in self.keys[:n]]


class Meant(Found):
    source = SEM


class Step(Stage):
    """Notes, in ``log``, that it ran and whether it was handed a transaction."""

    def __init__(
        self, name: str, log: list, *, reads: bool = False, drop: bool = False, depth: int = 0
    ):
        self.name = name
        self.log = log
        self.reads = reads  # type: ignore[misc]
        self.drop = drop
        self.needs = depth

    def depth(self, engine: Any, call: Call) -> int:
        return self.needs

    def apply(self, engine: Any, call: Call, ranked: list, uow: Any) -> list:
        if not ranked and call.found:  # the first stage of a hybrid search joins the paths
            ranked = [c for found in call.found.values() for c in found]
        self.log.append((self.name, uow is not None))
        return [] if self.drop else ranked


class AsyncStep(AsyncStage):
    def __init__(self, log: list) -> None:
        self.log = log

    async def apply(self, engine: Any, call: Call, ranked: list) -> list:
        self.log.append(("async", None))
        return ranked


class CountingDatabase(FakeDatabase):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def read_in_transaction(self, fn: Any) -> Any:
        self.reads += 1
        return await super().read_in_transaction(fn)


async def _search(
    recipe: Recipe, mode=SearchMode.HYBRID, limit=3, **kw
) -> tuple[list, CountingDatabase]:
    db = CountingDatabase()
    engine = Engine(recipe, db, None, None)  # type: ignore[arg-type]
    call = Call("q", limit, mode, None, **kw)
    return [hit async for hit in engine.search(call)], db


def _recipe(paths, stages=(), opens=True, candidates=4) -> Recipe:
    return Recipe(kind=Kind(opens), paths=tuple(paths), stages=tuple(stages), candidates=candidates)  # type: ignore[arg-type]


async def test_a_kind_that_opens_to_nothing_runs_no_path():
    found = Found([1])
    hits, db = await _search(_recipe([found], opens=False), SearchMode.KEYWORD)
    assert (hits, found.asked, db.reads) == ([], [], 0)


async def test_a_lone_path_ranks_the_page_and_hybrid_paths_the_depth_times_the_candidates():
    log: list = []
    found, meant = Found([1, 2, 3, 4]), Meant([5])
    hits, _ = await _search(_recipe([found, meant], [Step("s", log)]), SearchMode.KEYWORD, limit=3)
    assert found.asked == [3] and meant.asked == []
    assert [key for key, _ in hits] == [1, 2, 3]
    found.asked.clear()
    await _search(_recipe([found, meant], [Step("s", log)]), limit=3)
    assert (found.asked, meant.asked) == ([12], [12])
    found.asked.clear()
    await _search(_recipe([found, meant], [Step("s", log, depth=10)]), limit=3)
    assert found.asked == [40]  # a stage that needs 10 candidates raises the depth


async def test_reading_stages_share_one_read_with_the_pure_stages_after_them():
    log: list = []
    stages = [
        Step("pure before", log),
        Step("reads", log, reads=True),
        Step("pure after", log),
        Step("reads again", log, reads=True),
    ]
    hits, db = await _search(_recipe([Found([1]), Meant([2])], stages))
    assert db.reads == 1
    # A pure stage is handed no transaction, wherever it runs.
    assert log == [
        ("pure before", False),
        ("reads", True),
        ("pure after", False),
        ("reads again", True),
    ]
    assert [key for key, _ in hits] == [1, 2]


async def test_a_stage_that_leaves_nothing_ends_the_search_before_any_read():
    log: list = []
    stages = [Step("empties", log, drop=True), Step("reads", log, reads=True), AsyncStep(log)]
    hits, db = await _search(_recipe([Found([1]), Meant([2])], stages))
    assert (hits, db.reads, log) == ([], 0, [("empties", False)])


async def test_an_async_step_runs_between_two_reads_and_not_after_an_empty_one():
    log: list = []
    stages = [Step("reads", log, reads=True), AsyncStep(log), Step("reads after", log, reads=True)]
    hits, db = await _search(_recipe([Found([1]), Meant([2])], stages))
    assert db.reads == 2 and [name for name, _ in log] == ["reads", "async", "reads after"]
    log.clear()
    stages = [
        Step("reads", log, reads=True, drop=True),
        AsyncStep(log),
        Step("later", log, reads=True),
    ]
    hits, db = await _search(_recipe([Found([1]), Meant([2])], stages))
    assert (hits, db.reads, [name for name, _ in log]) == ([], 1, ["reads"])


async def test_a_later_path_down_is_left_out_and_every_hit_says_why():
    heard: list[str] = []
    down = Meant([], fault=Unavailable("semantic search is unavailable: away"))
    hits, _ = await _search(
        _recipe([Found([1, 2]), down], [Step("s", [])]), on_degraded=heard.append
    )
    assert hits == [
        (1, "semantic search is unavailable: away"),
        (2, "semantic search is unavailable: away"),
    ]
    assert heard == ["semantic search is unavailable: away"]


async def test_the_first_path_down_fails_the_search():
    down = Found([], fault=Unavailable("keyword search is unavailable"))
    with pytest.raises(Unavailable, match="keyword search is unavailable"):
        await _search(_recipe([down, Meant([1])], [Step("s", [])]))
