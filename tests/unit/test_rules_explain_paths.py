"""What ``explain`` records of the candidate paths (domain/retrieval/
explain_recorder.py), on plain candidates and scripted paths: each path's
own ranking; why it did not find a hit another path found (every match it
had, when it returned fewer than asked; otherwise only the hits it says it
does not match at all, and nothing when it cannot tell); a path that was
down; the query's words a hit matched; and no recording without explain.

The explanation of the later stages is tests/unit/test_explain.py's; over
the wire, tests/e2e/service/test_search_explain.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.domain.retrieval import explain
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.explain_recorder import QUIET, Recorder, runner_for
from nexus_grpc.domain.retrieval.hits import StageScore
from nexus_grpc.domain.retrieval.pipeline import Path

KW, SEM = SearchSource.KEYWORD, SearchSource.SEMANTIC


class Keyword(Path):
    source = KW
    no_match = "no query word matched"

    def __init__(self, matches: set[int] | None = None) -> None:
        self.matches = matches
        self.asked: list[list[int]] = []

    def temperature(self, engine: Any) -> float:
        return 1.0

    async def find(self, engine: Any, call: Call, n: int) -> list[Candidate]:
        raise AssertionError("the recorder reads what the paths found")

    async def matching(self, engine: Any, call: Call, keys: Sequence[int]) -> set[int] | None:
        self.asked.append(list(keys))
        return self.matches


class Semantic(Keyword):
    source = SEM
    no_match = None  # a nearest neighbour search matches everything


def _call(keyword: list[int], semantic: list[int], text: str = "orchids in winter") -> Call:
    call = Call(text, 10, SearchMode.HYBRID, None, explain=True)
    call.found = {
        KW: [Candidate(k, 10.0 - i, (KW,)) for i, k in enumerate(keyword)],
        SEM: [Candidate(k, 0.9 - i / 10, (SEM,)) for i, k in enumerate(semantic)],
    }
    return call


@dataclass(frozen=True)
class Hit:
    explanation: tuple[StageScore, ...] = ()


def _entry(recorder: Recorder, key: int, stage: str) -> StageScore:
    (entry,) = [s for s in recorder.trace.explanation(key) if s.stage == stage]
    return entry


async def test_each_paths_own_ranking_is_recorded_with_its_rank_and_raw_score():
    call = _call([5, 6], [6])
    recorder = Recorder(call)
    await recorder.paths_found(None, call, [Keyword(), Semantic()], 3)  # type: ignore[arg-type]
    keyword, semantic = _entry(recorder, 6, explain.KEYWORD), _entry(recorder, 6, explain.SEMANTIC)
    assert (keyword.rank, keyword.score, semantic.rank, semantic.score) == (2, 9.0, 1, 0.9)
    # The semantic path ranked 3 at most and did not name 5 among them.
    assert _entry(recorder, 5, explain.SEMANTIC) == StageScore(
        explain.SEMANTIC, 0, 0.0, "not among its best 3"
    )


async def test_a_path_that_returned_fewer_than_asked_found_every_match_it_had():
    call = _call([5], [6, 7])
    keyword = Keyword()
    recorder = Recorder(call)
    await recorder.paths_found(None, call, [keyword, Semantic()], 3)  # type: ignore[arg-type]
    assert keyword.asked == []  # no need to ask
    for key in (6, 7):
        assert _entry(recorder, key, explain.KEYWORD).note == "no query word matched"


async def test_a_full_path_is_asked_and_only_hits_it_does_not_match_are_said_unmatched():
    call = _call([1, 2], [6, 7])
    keyword = Keyword(matches={6})
    recorder = Recorder(call)
    await recorder.paths_found(None, call, [keyword, Semantic()], 2)  # type: ignore[arg-type]
    assert keyword.asked == [[6, 7]]
    assert _entry(recorder, 6, explain.KEYWORD).note == "not among its best 2"
    assert _entry(recorder, 7, explain.KEYWORD).note == "no query word matched"


async def test_a_path_that_cannot_tell_what_it_matches_says_only_it_was_not_among_its_best():
    call = _call([1, 2], [6])
    recorder = Recorder(call)
    await recorder.paths_found(None, call, [Keyword(matches=None), Semantic()], 2)  # type: ignore[arg-type]
    assert _entry(recorder, 6, explain.KEYWORD).note == "not among its best 2"


def test_a_path_that_was_down_and_found_nothing_says_why():
    call = _call([], [])
    recorder = Recorder(call)
    recorder.paths_down(
        [Keyword(), Semantic()], [[Candidate(1, 1.0, (KW,))], []], ["the embedder is away"]
    )
    # Only the path that found nothing is said to be down.
    assert recorder.trace.explanation(1) == (
        StageScore(explain.SEMANTIC, 0, 0.0, "unavailable: the embedder is away"),
    )


def test_a_hit_names_the_query_words_its_text_holds_and_stopwords_are_not_words():
    call = _call([1], [], text="the orchids in Winter")
    recorder = Recorder(call)
    assert recorder.trace.words == ("orchids", "winter")
    recorder.trace.ranked(explain.KEYWORD, [(1, 3.0)])
    kind = SimpleNamespace(document=lambda row: row)
    hit = Hit()
    explained = recorder.hit(kind, Candidate(1, 3.0, (KW,), row="Winter orchids need light"), hit)  # type: ignore[arg-type]
    assert explained.explanation[0].note.startswith("matched: orchids, winter")


def test_only_a_call_that_asked_for_explain_is_recorded():
    quiet = Call("orchids", 10, SearchMode.HYBRID, None)
    assert runner_for(quiet) is QUIET and quiet.trace is None
    asked = Call("orchids", 10, SearchMode.HYBRID, None, explain=True)
    runner = runner_for(asked)
    assert isinstance(runner, Recorder) and asked.trace is runner.trace
