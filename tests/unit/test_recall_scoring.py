"""The recall evaluation's scorer (nexus_grpc/evaluation/recall.py) on plain
values: where a question's first evidence lands becomes recall@k, MRR, the
reach past 10 and recall@10 per category; the percentiles of latency; the
report's lines; the timed and photos constructions' texts; the command's
own refusals before any server is asked; and, with a scripted MemoryService
in-process, what each construction stores, where a question's first evidence
ranks among the hits, and the wait for indexing. Storing and asking over
gRPC on a real server is tests/e2e/service/test_recall_eval_photos.py's and
test_recall_floor.py's; the session date's reading is
test_episode_time_rules.py's; the photos construction's captions are
tests/unit/test_eval_recall_photos.py's."""

from __future__ import annotations

import argparse

import pytest

from nexus_grpc.evaluation import recall
from nexus_grpc.evaluation.locomo import Conversation, EpisodeText, Question, SessionText
from nexus_grpc.evaluation.recall import (
    EvalError,
    ModeResult,
    _timed_text,
    evaluate,
    format_report,
    percentile,
    result_key,
)


def _scored(ranks: list[int | None], limit: int = 10, categories: list[int] | None = None):
    result = ModeResult("keyword", limit=limit)
    for i, rank in enumerate(ranks):
        result.add(rank, (categories or [1] * len(ranks))[i], latency_ms=float(i + 1))
    return result


def test_recall_at_k_counts_the_questions_whose_evidence_is_within_the_first_k():
    result = _scored([1, 3, 7, None])
    assert (result.recall(1), result.recall(5), result.recall(10)) == (0.25, 0.5, 0.75)


def test_mrr_sums_one_over_each_rank_and_a_miss_adds_nothing():
    summary = _scored([1, 2, 4, None]).summary()
    assert summary["mrr"] == round((1 + 1 / 2 + 1 / 4) / 4, 4)


def test_no_questions_score_zero_not_a_division_by_zero():
    summary = ModeResult("keyword").summary()
    assert (summary["recall@1"], summary["mrr"], summary["p50_ms"]) == (0.0, 0.0, 0.0)
    assert ModeResult("keyword").recall(30) == 0.0


def test_a_depth_past_10_is_read_from_the_ranks():
    result = _scored([5, 15, 25, 60], limit=100)
    assert result.recall(10) == 0.25
    assert result.recall(20) == 0.5
    assert result.recall(30) == 0.75
    assert result.recall(100) == 1.0


def test_reach_reports_the_depths_past_10_within_the_limit_and_the_limit_itself():
    assert ModeResult("k", limit=10).reach() == []
    assert ModeResult("k", limit=30).reach() == [20, 30]
    assert ModeResult("k", limit=40).reach() == [20, 30, 40]
    summary = _scored([15], limit=40).summary()
    assert summary["recall@20"] == 1.0 and summary["recall@40"] == 1.0
    assert "recall@50" not in summary


def test_recall_at_10_by_category_counts_each_categorys_questions_apart():
    result = _scored([1, None, 12, 3], limit=20, categories=[2, 2, 4, 4])
    assert result.summary()["recall@10_by_category"] == {"2": 0.5, "4": 0.5}


def test_a_percentile_is_the_nearest_rank_of_the_sorted_latencies():
    ordered = [float(n) for n in range(1, 101)]
    assert percentile(ordered, 50) == 51.0  # round(0.5 * 99) = 50 (banker's: 49.5 -> 50)
    assert percentile(ordered, 99) == 99.0
    assert percentile(ordered, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) == 0.0


def test_a_timed_episode_loses_its_date_prefix_and_only_its_own():
    assert _timed_text("8 May", "[8 May] Ann: hi") == "Ann: hi"
    assert _timed_text("8 May", "[9 May] Ann: hi") == "[9 May] Ann: hi"


def test_the_readme_constructions_modes_keep_their_names_the_others_are_prefixed():
    assert result_key("readme", "keyword") == "keyword"
    assert result_key("timed", "keyword") == "timed:keyword"


def _report(**modes: dict) -> dict:
    return {
        "episodes": 12,
        "questions": 3,
        "skipped_questions": 1,
        "conversations": ["26"],
        "limit": 10,
        "ingest_seconds": 4.5,
        "modes": modes,
    }


def test_the_report_heads_with_the_counts_and_one_line_per_mode():
    keyword = _scored([1, 3, None], categories=[1, 2, 2]).summary()
    lines = format_report(_report(keyword=keyword)).splitlines()
    assert lines[0] == (
        "12 episodes, 3 questions (1 without mapped evidence skipped), 1 conversations;"
        " limit=10; stored and indexed in 4.5 s"
    )
    assert lines[3].split() == ["keyword", "0.333", "0.667", "0.667", "0.444", "2.0", "3.0"]
    assert "reach" not in "\n".join(lines)  # limit 10: nothing past it to report
    assert lines[-2].split() == ["mode", "cat", "1", "cat", "2"]
    assert lines[-1].split() == ["keyword", "1.000", "0.500"]


def test_the_report_shows_the_reach_when_the_limit_goes_past_10():
    keyword = _scored([15, None], limit=25).summary()
    report = _report(keyword=keyword)
    report["limit"] = 25
    text = format_report(report)
    assert "reach: the evidence within the first k hits" in text
    header = next(line for line in text.splitlines() if "R@20" in line and "R@25" in line)
    row = text.splitlines()[text.splitlines().index(header) + 1]
    assert row.split() == ["keyword", "0.500", "0.500"]


async def test_an_unknown_mode_is_refused_before_anything_is_read():
    with pytest.raises(EvalError, match="unknown mode vector; expected keyword"):
        await evaluate("unused:1", ["/nonexistent"], modes=("vector",), progress_out=None)


async def test_an_unknown_construction_is_refused_before_anything_is_read():
    with pytest.raises(EvalError, match="unknown construction 'dated'"):
        await evaluate("unused:1", ["/nonexistent"], construction="dated", progress_out=None)


def test_a_limit_under_10_is_refused_with_status_2(capsys):
    parser = argparse.ArgumentParser()
    recall.add_arguments(parser)
    args = parser.parse_args(["--data", "/nonexistent", "--limit", "5"])
    assert recall.main(args) == 2
    assert "--limit must be at least 10 (recall@10)" in capsys.readouterr().err


def test_missing_data_fails_the_command_with_status_2_and_says_where(capsys):
    parser = argparse.ArgumentParser()
    recall.add_arguments(parser)
    args = parser.parse_args(["--data", "/nonexistent/locomo"])
    assert recall.main(args) == 2
    assert "nexus-grpc eval recall: /nonexistent/locomo: no such file or folder" in (
        capsys.readouterr().err
    )


class _Out:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


@pytest.fixture
def monotonic(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(recall, "time", argparse.Namespace(monotonic=lambda: now[0]))
    return now


def test_progress_off_a_terminal_writes_a_line_every_5_s_and_every_final_line(monotonic):
    out = _Out(tty=False)
    progress = recall.Progress(out)  # type: ignore[arg-type]
    progress("storing: 1/9")
    monotonic[0] += 4.9
    progress("storing: 2/9")  # too soon: dropped
    monotonic[0] += 0.2
    progress("storing: 3/9")
    progress("stored 9 episodes", final=True)  # never dropped
    assert out.text == "storing: 1/9\nstoring: 3/9\nstored 9 episodes\n"


def test_progress_on_a_terminal_overwrites_one_line_and_ends_it_when_final(monotonic):
    out = _Out(tty=True)
    progress = recall.Progress(out)  # type: ignore[arg-type]
    progress("asking: 1/4")
    monotonic[0] += 0.1
    progress("asking: 2/4")  # within 0.2 s: dropped
    monotonic[0] += 0.2
    progress("asking: 3/4")
    progress("asked 4 searches", final=True)
    clear = "\r\x1b[2K"
    assert out.text == f"{clear}asking: 1/4{clear}asking: 3/4{clear}asked 4 searches\n"


# ---- storing and asking, with a scripted stub in-process ------------------------------------


class _Hit:
    def __init__(self, episode_id: int) -> None:
        self.episode = argparse.Namespace(id=episode_id)


class ScriptedMemory:
    """The MemoryService calls the evaluation makes, answered in-process."""

    def __init__(self, hits: list[int] | None = None, queues: list | None = None) -> None:
        self.hits = hits or []
        self.queues = queues or []
        self.searches: list = []
        self.episodes: list = []
        self._ids = iter(range(1000, 2000))

    async def CreateProject(self, request, **_kw):  # noqa: N802 - the RPC's name
        return argparse.Namespace(id=7)

    async def CreateSession(self, request, **_kw):  # noqa: N802
        return argparse.Namespace(id=next(self._ids))

    async def CreateEpisode(self, request, **_kw):  # noqa: N802
        self.episodes.append(request)
        return argparse.Namespace(id=next(self._ids))

    async def GetServiceStatus(self, request, **_kw):  # noqa: N802
        return argparse.Namespace(queues=self.queues)

    async def _search(self):
        for episode_id in self.hits:
            yield _Hit(episode_id)

    def SearchEpisodes(self, request, **_kw):  # noqa: N802
        self.searches.append(request)
        return self._search()


def _conversation() -> Conversation:
    date = "1:56 pm on 8 May, 2023"
    episodes = (
        EpisodeText(f"[{date}] Ann: look", "Bo: nice", ("D1:1", "D1:2"), user_photo="a sunset"),
        EpisodeText(f"[{date}] Ann: a beagle", recall.NO_REPLY, ("D1:3",), ai_photo="unused"),
    )
    question = Question("Which dog?", 2, frozenset({1}))
    return Conversation("26", ("Ann", "Bo"), (SessionText(date, episodes),), (question,))


async def test_a_questions_rank_is_where_its_first_evidence_episode_is_found():
    stored = recall.Stored(_conversation(), project_id=7, episode_ids=[501, 502])
    stub = ScriptedMemory(hits=[900, 501, 502, 502])  # 502 is episode 1: the evidence
    results = await recall._ask(stub, [stored], ["fused"], 10, 5.0, recall.Progress(None))  # type: ignore[arg-type]
    assert results["fused"].ranks == [3]
    [search] = stub.searches
    assert (search.project_id, search.query, search.limit, search.skip_rerank) == (
        7,
        "Which dog?",
        10,
        True,
    )


async def test_evidence_not_in_the_hits_is_a_miss():
    stored = recall.Stored(
        _conversation(), project_id=7, episode_ids=[501, 502], construction="timed"
    )
    stub = ScriptedMemory(hits=[501])
    results = await recall._ask(stub, [stored], ["keyword"], 10, 5.0, recall.Progress(None))  # type: ignore[arg-type]
    assert results["timed:keyword"].ranks == [None]
    assert stub.searches[0].skip_rerank is False


async def test_the_timed_construction_moves_the_date_into_each_episodes_time():
    stub = ScriptedMemory()
    done = [0]
    await recall._store(stub, _conversation(), "run1", 5.0, done, "timed")  # type: ignore[arg-type]
    start = recall.session_time("1:56 pm on 8 May, 2023")
    got = [(e.user_message, e.occur_time.seconds, e.request_id) for e in stub.episodes]
    assert got == [
        ("Ann: look", int(start), "run1-26-timed-1-0"),
        ("Ann: a beagle", int(start) + recall.TURN_SECONDS, "run1-26-timed-1-1"),
    ]
    assert done == [2]


async def test_the_photos_construction_never_captions_a_missing_reply():
    """A turn with no reply keeps "(no reply)", whatever caption the data set holds."""
    stub = ScriptedMemory()
    stored = await recall._store(stub, _conversation(), "run1", 5.0, [0], "photos")  # type: ignore[arg-type]
    assert stub.episodes[1].ai_response == recall.NO_REPLY
    assert not stub.episodes[1].HasField("occur_time")
    assert (stored.project_id, stored.construction, len(stored.episode_ids)) == (7, "photos", 2)


def _queue(pending: int, failed: int = 0):
    return argparse.Namespace(kind=recall.INDEX_QUEUE, pending=pending, failed=failed)


async def _wait(stub: ScriptedMemory, deadline_s: float) -> None:
    await recall._wait_indexed(stub, recall.Progress(None), 5.0, deadline_s)  # type: ignore[arg-type]


async def test_indexing_is_done_when_nothing_waits_and_fails_on_a_failed_episode():
    await _wait(ScriptedMemory(queues=[_queue(0)]), 60.0)
    await _wait(ScriptedMemory(queues=[]), 60.0)  # no index queue: nothing to wait for
    with pytest.raises(EvalError, match="2 episodes failed to index; see GetServiceStatus"):
        await _wait(ScriptedMemory(queues=[_queue(3, 2)]), 60.0)


async def test_indexing_past_its_deadline_says_how_many_still_wait():
    with pytest.raises(EvalError, match=r"3 episodes still waiting to be indexed after -1.0s"):
        await _wait(ScriptedMemory(queues=[_queue(3)]), -1.0)
