"""The reranker's rules, on plain in-memory inputs and a scripted service:
the search stage (domain/retrieval/rerank.py) reorders only the first
candidates of a hybrid search and leaves the rest in fused order, keeps the
fused order and says why on any failure, and runs only when asked; the
service as search uses it (rerank/reranker.py) is skipped for a while after
a failure, within the caller's deadline, and counted.

What the rerank client reads and sends over HTTP is
tests/integration/rerank/test_rerank_client.py's; a real server's searches
with a rerank stand-in (the scope it sees, the trailer, health, metrics, the
caller's gRPC deadline) are tests/e2e/service/test_search_rerank.py's."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.explain import Trace
from nexus_grpc.domain.retrieval.explain_recorder import Recorder
from nexus_grpc.domain.retrieval.rerank import Rerank, Reranked
from nexus_grpc.rerank import RerankTimeout
from nexus_grpc.rerank.rerank_errors import RerankRejected, RerankSkipped
from nexus_grpc.rerank.reranker import COOLDOWN_MAX, COOLDOWN_START, Reranker
from nexus_grpc.runtime import deadlines

BOTH = (SearchSource.KEYWORD, SearchSource.SEMANTIC)


class Service:
    """The rerank service as a script: each document's score from ``scores``
    (by its text), or ``fault`` raised; what it was asked is kept."""

    endpoint = "http://reranker.test/rerank"
    model = ""

    def __init__(self, scores: dict[str, float] | None = None) -> None:
        self.scores_by_text = scores or {}
        self.fault: Exception | None = None
        self.asked: list[tuple[str, list[str], float]] = []

    async def scores(self, query: str, texts: Sequence[str], budget: float) -> list[float]:
        self.asked.append((query, list(texts), budget))
        if self.fault is not None:
            raise self.fault
        return [self.scores_by_text.get(t, 0.0) for t in texts]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def engine(reranker: Any) -> Any:
    """What the stage reads of an engine: the reranker and the kind's text."""
    kind = SimpleNamespace(document=lambda row: f"text of {row}")
    return SimpleNamespace(reranker=reranker, recipe=SimpleNamespace(kind=kind))


def fused(*keys: int) -> list[Candidate]:
    """Candidates in fused order, scores falling from 0.9."""
    return [Candidate(k, 0.9 - i / 10, BOTH, row=f"row {k}") for i, k in enumerate(keys)]


def call(mode: SearchMode = SearchMode.HYBRID, *, rerank: bool = True, heard=None) -> Call:
    return Call("postgres replication", 10, mode, None, rerank=rerank, on_degraded=heard)


def service_of(scores: dict[int, float]) -> Service:
    return Service({f"text of row {k}": s for k, s in scores.items()})


async def test_the_first_candidates_are_reordered_and_the_rest_follow_in_fused_order():
    service = service_of({1: 0.2, 2: 0.9, 3: 1.0, 4: 0.1})
    reranker = Reranker(service, candidates=2, timeout=3.0)  # type: ignore[arg-type]
    ranked = fused(1, 2, 3, 4)
    out = await Rerank().apply(engine(reranker), call(), ranked)
    [(query, texts, _)] = service.asked
    assert query == "postgres replication"  # the question as asked
    assert texts == ["text of row 1", "text of row 2"]  # the head only, as the kind reads it
    assert [c.key for c in out] == [2, 1, 3, 4]
    assert [c.reranked for c in out] == [True, True, False, False]
    assert [c.score for c in out[:2]] == [0.9, 0.2]  # the service's relevance
    assert [c.score for c in out[2:]] == pytest.approx([0.7, 0.6])  # fused, as they were
    assert isinstance(out, Reranked) and out.head == 2 and out.failure is None


async def test_candidates_the_service_scores_alike_keep_their_fused_order():
    service = service_of({5: 0.5, 6: 0.5, 7: 0.8, 8: 0.5})
    reranker = Reranker(service, candidates=30, timeout=3.0)  # type: ignore[arg-type]
    out = await Rerank().apply(engine(reranker), call(), fused(5, 6, 7, 8))
    assert [c.key for c in out] == [7, 5, 6, 8]


async def test_a_failing_service_leaves_the_fused_order_and_says_why_on_the_call():
    service = Service()
    service.fault = RerankRejected(500, "HTTP 500: model crashed")
    reranker = Reranker(service, candidates=30, timeout=3.0)  # type: ignore[arg-type]
    heard: list[str] = []
    c = call(heard=heard.append)
    ranked = fused(1, 2, 3)
    out = await Rerank().apply(engine(reranker), c, ranked)
    assert [x.key for x in out] == [1, 2, 3]
    assert [x.score for x in out] == pytest.approx([0.9, 0.8, 0.7])
    assert not any(x.reranked for x in out)
    assert c.degraded_reason == "reranker: HTTP 500: model crashed"
    assert heard == [c.degraded_reason]
    trace = Trace()
    Rerank().explain(trace, out)
    [stage] = [s for s in trace.explanation(1) if s.stage == "reranked"]
    assert stage.note == "failed, the fused order stands: HTTP 500: model crashed"


def test_the_stage_runs_on_hybrid_searches_that_did_not_opt_out_and_says_why_not():
    reranker = Reranker(Service(), candidates=30, timeout=3.0)  # type: ignore[arg-type]
    stage, on, off = Rerank(), engine(reranker), engine(None)
    assert stage.applies(on, call()) and stage.depth(on, call()) == 30
    assert not stage.applies(on, call(rerank=False))
    assert stage.skipped_because(on, call(rerank=False)) == "skip_rerank asked for the fused order"
    assert not stage.applies(off, call())
    assert stage.skipped_because(off, call()) == "no reranker is configured (--reranker-url)"
    for mode in (SearchMode.KEYWORD, SearchMode.SEMANTIC):
        # One path's order is asked for: the stage is no part of it, and says nothing.
        assert not stage.applies(on, call(mode))
        assert stage.skipped_because(on, call(mode)) is None


async def test_after_a_failure_searches_skip_the_service_for_a_cooldown_that_doubles():
    service, clock = Service({"a": 1.0}), Clock()
    reranker = Reranker(service, candidates=30, timeout=3.0, clock=clock)  # type: ignore[arg-type]
    service.fault = RerankRejected(500, "HTTP 500: model crashed")
    with pytest.raises(RerankRejected):
        await reranker.rerank("q", ["a"])
    assert reranker.cooling_down() == COOLDOWN_START
    with pytest.raises(RerankSkipped, match=r"skipped for 2\.0 s more after a failure: HTTP 500"):
        await reranker.rerank("q", ["a"])
    assert len(service.asked) == 1  # the skipped search did not wait on it
    clock.now += COOLDOWN_START
    with pytest.raises(RerankRejected):
        await reranker.rerank("q", ["a"])  # asked again, failing again: twice as long
    assert reranker.cooling_down() == 2 * COOLDOWN_START
    for _ in range(10):
        clock.now += COOLDOWN_MAX
        with pytest.raises(RerankRejected):
            await reranker.rerank("q", ["a"])
    assert reranker.cooling_down() == COOLDOWN_MAX
    # The first answer ends it.
    clock.now += COOLDOWN_MAX
    service.fault = None
    assert await reranker.rerank("q", ["a"]) == [1.0]
    assert reranker.cooling_down() == 0.0
    assert reranker.stats.calls["rejected"] == 12 and reranker.stats.calls["skipped"] == 1
    assert reranker.stats.calls["ok"] == 1 and reranker.stats.asked == 13


async def in_call(seconds_left: float, work):
    """``work()`` inside an RPC with ``seconds_left`` to its deadline."""
    context = contextvars.copy_context()
    context.run(deadlines.start, seconds_left)
    return await asyncio.create_task(work(), context=context)


async def test_the_service_gets_its_own_timeout_or_what_the_caller_can_spare():
    service = Service({"a": 0.5})
    reranker = Reranker(service, candidates=30, timeout=3.0)  # type: ignore[arg-type]
    await reranker.rerank("q", ["a"])
    await in_call(60.0, lambda: reranker.rerank("q", ["a"]))  # the caller can wait longer
    await in_call(1.0, lambda: reranker.rerank("q", ["a"]))  # a quarter kept back, at most 0.25 s
    budgets = [budget for _, _, budget in service.asked]
    assert budgets[:2] == [3.0, 3.0]
    assert budgets[2] == pytest.approx(0.75, abs=0.01)
    with pytest.raises(RerankSkipped, match="deadline left no time"):
        await in_call(0.001, lambda: reranker.rerank("q", ["a"]))
    assert len(service.asked) == 3


async def test_a_timeout_the_callers_deadline_caused_starts_no_cooldown():
    service = Service()
    service.fault = RerankTimeout("did not answer within 0.75 s")
    reranker = Reranker(service, candidates=30, timeout=60.0, clock=Clock())  # type: ignore[arg-type]
    with pytest.raises(RerankTimeout):
        await in_call(1.0, lambda: reranker.rerank("q", ["a"]))
    assert reranker.cooling_down() == 0.0
    # Its own timeout passing is the service's fault: skipped for a while.
    with pytest.raises(RerankTimeout):
        await reranker.rerank("q", ["a"])
    assert reranker.cooling_down() == COOLDOWN_START
    assert reranker.stats.calls["timeout"] == 2


async def test_documents_are_cut_to_what_a_cross_encoder_reads():
    service = Service()
    reranker = Reranker(service, candidates=30, timeout=3.0)  # type: ignore[arg-type]
    await reranker.rerank("q", ["x" * 5000, "short"])
    [(_, texts, _)] = service.asked
    assert [len(t) for t in texts] == [2000, 5]


def reranked_stage(trace: Trace, key: int):
    return next(s for s in trace.explanation(key) if s.stage == "reranked")


async def test_explain_reads_the_rerankers_order_and_why_a_hit_past_it_has_none():
    service = service_of({1: 0.2, 2: 0.9, 3: 1.0})
    reranker = Reranker(service, candidates=2, timeout=3.0)  # type: ignore[arg-type]
    out = await Rerank().apply(engine(reranker), call(), fused(1, 2, 3))
    trace = Trace()
    Rerank().explain(trace, out)
    assert [(reranked_stage(trace, k).rank, reranked_stage(trace, k).score) for k in (2, 1)] == [
        (1, 0.9),
        (2, 0.2),
    ]
    past = reranked_stage(trace, 3)
    assert (past.rank, past.note) == (
        0,
        "past the reranker's 2 candidates: in fused order after them",
    )


def test_explain_says_why_the_reranker_was_skipped_and_a_single_path_says_nothing():
    reranker = Reranker(Service(), candidates=30, timeout=3.0)  # type: ignore[arg-type]
    stage = Rerank()
    for on, asked, note in (
        (engine(reranker), call(rerank=False), "skipped: skip_rerank asked for the fused order"),
        (engine(None), call(), "skipped: no reranker is configured (--reranker-url)"),
    ):
        asked.explain = True
        recorder = Recorder(asked)
        recorder.skipped(on, asked, [stage], [])
        assert reranked_stage(recorder.trace, 1).note == note
    single = call(SearchMode.KEYWORD)
    recorder = Recorder(single)
    recorder.skipped(engine(reranker), single, [stage], [])
    assert not any(s.stage == "reranked" for s in recorder.trace.explanation(1))
