"""The one dispatcher every search runs through, and the shapes of what it runs.

A ``Recipe`` (declared per kind in recipes.py) names a kind, its candidate
paths and its stages; ``Engine.search`` runs it:

1. ``kind.open``: validate the kind's request and resolve its scope;
2. the paths the mode asks for: one alone (keyword or semantic mode) ranks
   ``limit`` candidates; several (hybrid) rank ``depth x candidates`` each
   (depth: the page, or the reranker's candidates when it runs), at once,
   the first (keyword) on a reader thread while the others embed. A later
   path failing with UNAVAILABLE is left out and reported
   (``Call.degrade``); the first one failing fails the search;
3. the stages, in order, each ``Ranked -> Ranked``. Stages that read the
   database run together in one read transaction, with the pure stages
   around them; an async stage (the reranker) runs between two such reads.
   The first stage to leave nothing ends the search before any further read;
4. ``kind.hit`` for each candidate left.

A lone path that can rank inside a read (``Path.find_in``) joins the stages'
read, so a keyword-mode search is still one read transaction.

Every step runs through a runner: ``QUIET`` (here), which only runs it, or,
for a search that asked for ``explain``, explain_recorder.py's ``Recorder``,
which records what each path and stage left around it. No stage or path
checks whether the call explains.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain.retrieval import explain
from nexus_grpc.domain.retrieval.call import Call, Candidate, Ranked
from nexus_grpc.domain.retrieval.common_terms import ScopeVocabulary
from nexus_grpc.domain.retrieval.explain import Trace
from nexus_grpc.domain.retrieval.ranking import keyword_if_down
from nexus_grpc.embedding import Embedder
from nexus_grpc.errors import Unavailable
from nexus_grpc.rerank import Reranker
from nexus_grpc.vectors import VectorIndex

H = TypeVar("H")
H_co = TypeVar("H_co", covariant=True)


class Kind(Protocol[H_co]):
    """What a searched kind (episodes, memories, entities) brings to the pipeline."""

    async def open(self, engine: Engine[Any], call: Call) -> bool:
        """Validate ``call.request`` and set ``call.scope``; False: nothing can match."""

    def document(self, row: Any) -> str:
        """A row's text as a reranker reads it."""

    def hit(self, candidate: Candidate, call: Call) -> H_co:
        """The hit the caller receives."""


class Path(ABC):
    """A candidate path: ranks ids within the call's scope, best first."""

    source: ClassVar[SearchSource]
    #: Fusion: a list whose best raw score is at or below this orders nothing.
    floor: ClassVar[float | None] = None
    #: ``find_in`` exists: ranks on a connection, so a lone path joins the read.
    ranks_in_read: ClassVar[bool] = False
    #: ``explain``'s reason for a hit this path did not find, when it returned
    #: fewer candidates than it was asked for (so it returned every match it
    #: had). None: all it can say is that the hit was not among its best.
    no_match: ClassVar[str | None] = None

    @abstractmethod
    def temperature(self, engine: Engine[Any]) -> float:
        """Raw-score distance from the best hit that costs a factor of e in fusion."""

    def skips(self, call: Call) -> bool:
        """Nothing to look for (no keyword left once common words are out)."""
        return False

    @abstractmethod
    async def find(self, engine: Engine[Any], call: Call, n: int) -> Ranked:
        """The best ``n`` candidates; Unavailable when the path's backend is down."""

    def find_in(self, uow: UnitOfWork, engine: Engine[Any], call: Call, n: int) -> Ranked:
        raise NotImplementedError

    async def matching(
        self, engine: Engine[Any], call: Call, keys: Sequence[int]
    ) -> set[int] | None:
        """``explain`` only: which of ``keys`` (found by other paths) this path
        matches at all, ranked or not; None when it cannot tell."""
        return None

    def explain_found(self, engine: Engine[Any], call: Call, trace: Trace) -> None:
        """``explain`` only: what the path says of candidates it left out,
        beyond not finding them (the vector path: below the floor)."""
        return None


def _explain_order(name: str | None, trace: Trace, ranked: Ranked) -> None:
    """The order a stage that ``explains`` left."""
    if name is not None:
        trace.ranked(name, [(c.key, c.score) for c in ranked])


class Stage(ABC):
    """One step over the ranked candidates, on the event loop or, when it
    ``reads``, inside the call's read transaction (``uow`` is then set)."""

    reads: ClassVar[bool] = False
    #: The ``explain`` stage whose order this step leaves (explain.py), if any.
    explains: ClassVar[str | None] = None

    def applies(self, engine: Engine[Any], call: Call) -> bool:
        return True

    def skipped_because(self, engine: Engine[Any], call: Call) -> str | None:
        """Why it does not run for this call, where ``explain`` should say so."""
        return None

    def depth(self, engine: Engine[Any], call: Call) -> int:
        """Filtered candidates this stage needs before the page is cut (0: none)."""
        return 0

    @abstractmethod
    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked: ...

    def explain(self, trace: Trace, ranked: Ranked) -> None:
        """``explain`` only, once ``apply`` left ``ranked``: what it made of it."""
        _explain_order(self.explains, trace, ranked)


class AsyncStage(ABC):
    """A step that waits on something outside the database (a rerank service)."""

    explains: ClassVar[str | None] = None

    def skipped_because(self, engine: Engine[Any], call: Call) -> str | None:
        """Why it does not run for this call, where ``explain`` should say so
        (None: it is no part of this call's pipeline at all)."""
        return None

    def applies(self, engine: Engine[Any], call: Call) -> bool:
        return True

    def depth(self, engine: Engine[Any], call: Call) -> int:
        return 0

    @abstractmethod
    async def apply(self, engine: Engine[Any], call: Call, ranked: Ranked) -> Ranked: ...

    def explain(self, trace: Trace, ranked: Ranked) -> None:
        """``explain`` only, once ``apply`` left ``ranked``: what it made of it."""
        _explain_order(self.explains, trace, ranked)


@dataclass(frozen=True)
class Recipe(Generic[H]):
    """A kind's whole search, declared in one place (recipes.py)."""

    kind: Kind[H]
    #: The first is the primary path: its failure fails a hybrid search.
    paths: tuple[Path, ...]
    stages: tuple[Stage | AsyncStage, ...]
    #: Candidates each path ranks in hybrid mode, per hit asked for.
    candidates: int
    #: A later path down while the primary found nothing is UNAVAILABLE rather
    #: than an empty answer (entities: "nothing named that" is no answer when
    #: meaning could not be searched).
    unavailable_alone: bool = False

    def __post_init__(self) -> None:
        by_mode = {SearchMode.HYBRID: self.paths}
        for mode, source in (
            (SearchMode.KEYWORD, SearchSource.KEYWORD),
            (SearchMode.SEMANTIC, SearchSource.SEMANTIC),
        ):
            by_mode[mode] = tuple(p for p in self.paths if p.source == source)
        object.__setattr__(self, "_by_mode", by_mode)

    def paths_for(self, mode: SearchMode) -> tuple[Path, ...]:
        """The paths a mode runs: all in hybrid, the one of its source otherwise."""
        return self._by_mode[mode]  # type: ignore[attr-defined, no-any-return]


def stage_of(path: Path) -> str:
    """The ``explain`` stage that reports a path's own ranking."""
    return explain.KEYWORD if path.source == SearchSource.KEYWORD else explain.SEMANTIC


def record_path(trace: Trace, path: Path, found: Ranked, n: int) -> None:
    """A path's own ranking, before fusion rescores its candidates."""
    trace.ranked(
        stage_of(path), [(c.key, c.score) for c in found], missing=f"not among its best {n}"
    )


class Quiet:
    """The runner of a search without ``explain``: each step as it is."""

    def skipped(
        self,
        engine: Engine[Any],
        call: Call,
        declared: Sequence[Stage | AsyncStage],
        running: Sequence[Stage | AsyncStage],
    ) -> None:
        """The recipe's stages (``declared``), of which ``running`` run for this call."""

    def paths_down(self, paths: Sequence[Path], found: Sequence[Ranked], down: list[str]) -> None:
        """Later paths that were down (``down``: why), each with what it found."""

    async def paths_found(
        self, engine: Engine[Any], call: Call, paths: Sequence[Path], n: int
    ) -> None:
        """Every path has ranked (``call.found``), ``n`` candidates each at most."""

    def run(
        self, stage: Stage, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        return stage.apply(engine, call, ranked, uow)

    async def run_async(
        self, stage: AsyncStage, engine: Engine[Any], call: Call, ranked: Ranked
    ) -> Ranked:
        return await stage.apply(engine, call, ranked)

    def hit(self, kind: Kind[Any], candidate: Candidate, hit: Any) -> Any:
        return hit


QUIET = Quiet()


class Engine(Generic[H]):
    """A recipe bound to what its stages use."""

    def __init__(
        self,
        recipe: Recipe[H],
        db: Database,
        embedder: Embedder,
        index: VectorIndex,
        reranker: Reranker | None = None,
    ) -> None:
        self.recipe = recipe
        self.db = db
        self.embedder = embedder
        self.index = index
        self.reranker = reranker
        # Words on most of a scope's texts, cached per scope (common_terms.py).
        self.vocabulary = ScopeVocabulary()

    async def search(self, call: Call, run: Quiet = QUIET) -> AsyncIterator[H]:
        """The call's hits, best first; ``run`` runs each step (a recorder,
        for ``explain``: explain_recorder.runner_for)."""
        recipe = self.recipe
        if not await recipe.kind.open(self, call):
            return
        paths = recipe.paths_for(call.mode)
        stages = [s for s in recipe.stages if s.applies(self, call)]
        run.skipped(self, call, recipe.stages, stages)
        call.depth = max([call.limit, *(s.depth(self, call) for s in stages)])
        pending: list[Stage] = []
        ranked: Ranked = []
        if len(paths) == 1 and paths[0].skips(call):
            return
        if len(paths) == 1 and paths[0].ranks_in_read:
            pending.append(_LonePath(paths[0], call.limit))
        else:
            # Hybrid: each path ranks ``candidates`` per hit the later stages
            # need (the page, or the reranker's candidates: it then reads the
            # top of what a search for that many hits would return).
            width = call.limit if len(paths) == 1 else call.depth * recipe.candidates
            await self._gather(call, paths, width, run)
            await run.paths_found(self, call, paths, width)
            ranked = _lone(call)
        for stage in stages:
            if isinstance(stage, AsyncStage):
                ranked = await self._flush(call, pending, ranked, run)
                pending = []
                if not ranked:
                    return
                ranked = await run.run_async(stage, self, call, ranked)
            else:
                pending.append(stage)
        ranked = await self._flush(call, pending, ranked, run)
        for candidate in ranked:
            yield run.hit(recipe.kind, candidate, recipe.kind.hit(candidate, call))

    async def _gather(self, call: Call, paths: Sequence[Path], n: int, run: Quiet = QUIET) -> None:
        """Every path's candidates into ``call.found``, in the recipe's order."""
        primary, *others = paths
        if not others:
            call.found[primary.source] = await primary.find(self, call, n)
            return
        down: list[str] = []
        first = asyncio.ensure_future(primary.find(self, call, n))
        try:
            rest: Sequence[Awaitable[Ranked]] = [
                keyword_if_down(p.find(self, call, n), down.append) for p in others
            ]
            found = [await rest[0]] if len(rest) == 1 else await asyncio.gather(*rest)
            call.found[primary.source] = await first
        finally:
            if not first.done():
                first.cancel()
        for path, ranked in zip(others, found, strict=True):
            call.found[path.source] = ranked
        if down and self.recipe.unavailable_alone and not call.found[primary.source]:
            raise Unavailable(down[0])
        for reason in down:
            call.degrade(reason)
        run.paths_down(others, found, down)

    async def _flush(self, call: Call, pending: list[Stage], ranked: Ranked, run: Quiet) -> Ranked:
        """Runs ``pending``: the pure stages before the first reading one on the
        loop (an empty ranking then ends the search with no read), the rest in
        one read transaction."""
        start = 0
        while start < len(pending) and not pending[start].reads:
            ranked = run.run(pending[start], self, call, ranked, None)
            start += 1
            if not ranked:
                return []
        rest = pending[start:]
        if not rest:
            return ranked

        def read(uow: UnitOfWork) -> Ranked:
            out = ranked
            for stage in rest:
                out = run.run(stage, self, call, out, uow if stage.reads else None)
                if not out:
                    return []
            return out

        return await self.db.read_in_transaction(read)


def _lone(call: Call) -> Ranked:
    """A single path's candidates as they are; several wait for fusion."""
    if len(call.found) == 1:
        return next(iter(call.found.values()))
    return []


class _LonePath(Stage):
    """The only path of a single-mode search, ranked inside the call's read."""

    reads = True

    def __init__(self, path: Path, n: int) -> None:
        self.path = path
        self.n = n

    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        assert uow is not None
        found = self.path.find_in(uow, engine, call, self.n)
        call.found[self.path.source] = found
        return found

    def explain(self, trace: Trace, ranked: Ranked) -> None:
        record_path(trace, self.path, ranked, self.n)
