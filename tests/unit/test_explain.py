"""``explain``'s record of a search (domain/retrieval/explain.py): stages in the
order they run whatever order they were noted in, rank 0 where a stage did
not find a hit, and what the filters dropped, recorded around the stage
(explain_recorder.py) rather than by it."""

from __future__ import annotations

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.domain.retrieval import explain
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.explain import Trace
from nexus_grpc.domain.retrieval.explain_recorder import Recorder
from nexus_grpc.domain.retrieval.filters import Keep
from nexus_grpc.domain.retrieval.pipeline import QUIET


def test_stages_read_in_the_order_they_run_and_a_miss_is_rank_zero():
    trace = Trace()
    trace.note(explain.RERANKED, "skipped: no reranker is configured")
    trace.ranked(explain.KEYWORD, [(7, 3.5), (8, 1.0)], missing="not among its best 10")
    trace.ranked(explain.SEMANTIC, [(8, 0.9)])
    trace.ranked("cohesion", [(8, 0.5), (7, 0.4)])  # a stage added later: after the known ones
    trace.ranked(explain.FUSED, [(8, 0.8), (7, 0.6)])
    seven = trace.explanation(7, matched=["falcon"])
    assert [(s.stage, s.rank) for s in seven] == [
        ("keyword", 1), ("semantic", 0), ("fused", 2), ("reranked", 0), ("cohesion", 2)
    ]  # fmt: skip
    assert seven[0].note == "matched: falcon" and seven[0].score == 3.5
    assert seven[3].note == "skipped: no reranker is configured"
    eight = trace.explanation(8)
    assert eight[0].note == "matched in its neighbouring turns or its other names"
    assert eight[1].score == 0.9


def test_a_keyword_miss_says_it_was_not_among_the_paths_best():
    trace = Trace()
    trace.ranked(explain.KEYWORD, [(1, 2.0)], missing="not among its best 10")
    [keyword] = trace.explanation(2)
    assert (keyword.rank, keyword.score, keyword.note) == (0, 0.0, "not among its best 10")


def test_a_miss_with_a_known_reason_says_that_reason_instead():
    # The keyword path found every match it had (issue 47, item 12): a hit it
    # did not find matched no query word; another hit keeps the stage's note.
    trace = Trace()
    trace.ranked(explain.KEYWORD, [(1, 2.0)], missing="not among its best 10")
    trace.missed(explain.KEYWORD, 2, "no query word matched")
    [two] = trace.explanation(2)
    [three] = trace.explanation(3)
    assert (two.rank, two.note) == (0, "no query word matched")
    assert three.note == "not among its best 10"
    # A stage that did rank the hit never says why it missed it.
    trace.missed(explain.KEYWORD, 1, "no query word matched")
    assert trace.explanation(1, matched=["falcon"])[0].note == "matched: falcon"


def in_scope(row, call) -> bool:
    return row != "theirs"


def test_the_filters_say_how_many_candidates_they_dropped():
    call = Call("q", 2, SearchMode.HYBRID, None, explain=True)
    recorder = Recorder(call)
    call.depth = 2
    ranked = [
        Candidate(1, 0.9, (SearchSource.KEYWORD,), row="mine"),
        Candidate(2, 0.8, (SearchSource.KEYWORD,), row="theirs"),
        Candidate(3, 0.7, (SearchSource.KEYWORD,), row="mine"),
        Candidate(4, 0.6, (SearchSource.KEYWORD,), row="theirs"),
    ]
    # The recorder runs the stage and records what it left around it.
    kept = recorder.run(Keep((in_scope,)), None, call, ranked, None)  # type: ignore[arg-type]
    assert [c.key for c in kept] == [1, 3]
    [filtered] = recorder.trace.explanation(1)
    assert (filtered.stage, filtered.rank) == ("filtered", 1)
    assert filtered.note == "1 candidate above the last kept was dropped by its filters (in scope)"
    # Without explain, the stage runs as it is and nothing is recorded.
    quiet = Call("q", 2, SearchMode.HYBRID, None)
    quiet.depth = 2
    kept = QUIET.run(Keep((in_scope,)), None, quiet, ranked, None)  # type: ignore[arg-type]
    assert [c.key for c in kept] == [1, 3]
    assert quiet.trace is None
