"""The reranker: a cross-encoder on the LAN (``--reranker-url``) reads the
question with each of the top fused candidates and orders them.

The union of the keyword and vector paths' top 30 holds the evidence for
0.967 of the LoCoMo dev questions while the fused order finds it in the top
10 for 0.922 (docs/recall.md): the candidates are there, the order is not,
and ordering is what a cross-encoder does. It runs on the default (hybrid)
mode only: a keyword or semantic search asks for that one path's order.

Whatever goes wrong, the search answers: a slow, failing or cooling-down
service, or a deadline too near, leaves the fused order and says why on
every hit (``degraded_reason``). Candidates past the reranker's count follow
the reranked ones in fused order. Filters have run before this stage, so the
service never reads a row the caller may not see.
"""

from __future__ import annotations

from typing import Any

from nexus_grpc.core.models import SearchMode
from nexus_grpc.domain.retrieval import explain
from nexus_grpc.domain.retrieval.call import Call, Candidate, Ranked
from nexus_grpc.domain.retrieval.explain import Trace
from nexus_grpc.domain.retrieval.pipeline import AsyncStage, Engine
from nexus_grpc.rerank import RerankError


class Rerank(AsyncStage):
    def applies(self, engine: Engine[Any], call: Call) -> bool:
        return engine.reranker is not None and call.rerank and call.mode == SearchMode.HYBRID

    # Its explanation is its own (``explain``): a failure keeps the fused order.
    explains = explain.RERANKED

    def skipped_because(self, engine: Engine[Any], call: Call) -> str | None:
        if call.mode != SearchMode.HYBRID:
            return None  # a single path's order is asked for: no part of this pipeline
        if engine.reranker is None:
            return "no reranker is configured (--reranker-url)"
        return "skip_rerank asked for the fused order"

    def depth(self, engine: Engine[Any], call: Call) -> int:
        return engine.reranker.candidates if engine.reranker is not None else 0

    async def apply(self, engine: Engine[Any], call: Call, ranked: Ranked) -> Ranked:
        reranker = engine.reranker
        assert reranker is not None
        head = ranked[: reranker.candidates]
        documents = [engine.recipe.kind.document(c.row) for c in head]
        try:
            scores = await reranker.rerank(call.text, documents)
        except RerankError as exc:
            call.degrade(f"reranker: {exc.message}")
            return Reranked(ranked, failure=exc.message)
        # Stable: candidates the model scores alike keep their fused order.
        order = sorted(range(len(head)), key=lambda i: scores[i], reverse=True)
        for i in order:
            head[i].score = scores[i]
            head[i].reranked = True
        return Reranked([head[i] for i in order] + ranked[len(head) :], head=len(head))

    def explain(self, trace: Trace, ranked: Ranked) -> None:
        """The reranker's order and relevance, or why the fused order stands."""
        assert isinstance(ranked, Reranked)
        if ranked.failure is not None:
            trace.note(explain.RERANKED, f"failed, the fused order stands: {ranked.failure}")
            return
        trace.ranked(
            explain.RERANKED,
            [(c.key, c.score) for c in ranked[: ranked.head]],
            missing=f"past the reranker's {ranked.head} candidates: in fused order after them",
        )


class Reranked(list[Candidate]):
    """The candidates as the reranker left them: its ``head`` first, in its
    order; or, when it failed (``failure``: why), as they came."""

    def __init__(self, ranked: Ranked, *, head: int = 0, failure: str | None = None) -> None:
        super().__init__(ranked)
        self.head = head
        self.failure = failure
