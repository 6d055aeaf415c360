"""``explain`` as a wrapper around the pipeline's stages, not checks inside them.

``Engine.search`` runs every step through a runner (``runner_for``, called
by each door of search.py): ``pipeline.QUIET`` for a search that did not
ask, which only runs the step, and a ``Recorder`` for one that did, which
runs it and then records in the call's ``Trace`` (explain.py) what the step
left: a stage's order (``Stage.explain``) and what it says of its own run
beyond that (the filters, how many they dropped; the reranker, its failure);
each path's own ranking before fusion rescores it and, where another path
found a hit, why this one did not (``Path.no_match``, ``Path.matching``,
``Path.explain_found``: the vector path's candidates below the embedder's
floor); each hit's explanation as it leaves. The stages and paths compute
only what they compute anyway; a search without ``explain`` records nothing
and costs what it did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain.retrieval import keyword_query
from nexus_grpc.domain.retrieval.call import Call, Candidate, Ranked
from nexus_grpc.domain.retrieval.explain import Trace
from nexus_grpc.domain.retrieval.pipeline import (
    QUIET,
    AsyncStage,
    Engine,
    Kind,
    Path,
    Quiet,
    Stage,
    record_path,
    stage_of,
)


def runner_for(call: Call) -> Quiet:
    """How the engine runs ``call``'s steps: recording, when it asked for
    ``explain``; otherwise ``QUIET``."""
    return Recorder(call) if call.explain else QUIET


class Recorder(Quiet):
    """The runner of a search with ``explain``: records as each step ends."""

    def __init__(self, call: Call) -> None:
        self.trace = call.trace = Trace()
        self.trace.words = tuple(
            w for w in keyword_query.words(call.text) if w not in keyword_query.STOPWORDS
        )

    def skipped(
        self,
        engine: Engine[Any],
        call: Call,
        declared: Sequence[Stage | AsyncStage],
        running: Sequence[Stage | AsyncStage],
    ) -> None:
        for stage in declared:
            if stage in running:
                continue
            why = stage.skipped_because(engine, call)
            if why is not None and stage.explains is not None:
                self.trace.note(stage.explains, f"skipped: {why}")

    def paths_down(self, paths: Sequence[Path], found: Sequence[Ranked], down: list[str]) -> None:
        for path, ranked in zip(paths, found, strict=True):
            if not ranked and down:
                self.trace.note(stage_of(path), f"unavailable: {'; '.join(down)}")

    async def paths_found(
        self, engine: Engine[Any], call: Call, paths: Sequence[Path], n: int
    ) -> None:
        """Each path's own ranking, and why it did not find what another path
        found: a path that returned fewer than ``n`` found every match it had
        (``Path.no_match``); one that returned ``n`` is asked which of the others'
        candidates it matches at all."""
        for path in paths:
            path.explain_found(engine, call, self.trace)
        keys = {c.key for ranked in call.found.values() for c in ranked}
        for path in paths:
            found = call.found.get(path.source, [])
            record_path(self.trace, path, found, n)
            others = sorted(keys - {c.key for c in found})
            if path.no_match is None or not others:
                continue
            if len(found) < n:
                unmatched = others
            else:
                matched = await path.matching(engine, call, others)
                unmatched = [] if matched is None else [k for k in others if k not in matched]
            for key in unmatched:
                self.trace.missed(stage_of(path), key, path.no_match)

    def run(
        self, stage: Stage, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        out = stage.apply(engine, call, ranked, uow)
        stage.explain(self.trace, out)
        return out

    async def run_async(
        self, stage: AsyncStage, engine: Engine[Any], call: Call, ranked: Ranked
    ) -> Ranked:
        out = await stage.apply(engine, call, ranked)
        stage.explain(self.trace, out)
        return out

    def hit(self, kind: Kind[Any], candidate: Candidate, hit: Any) -> Any:
        text = set(keyword_query.words(kind.document(candidate.row)))
        matched = [w for w in self.trace.words if w in text]
        # Every hit type has an ``explanation`` (hits.py).
        return replace(cast(Any, hit), explanation=self.trace.explanation(candidate.key, matched))
