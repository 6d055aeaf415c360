"""GetUsage's window and buckets (domain/usage_report.py): defaults, the
checks a request meets, and every bucket of the window, cut to it."""

from __future__ import annotations

import pytest

from nexus_grpc.core.llm_usage import ActivityBucket, StageBucket
from nexus_grpc.domain.usage_report import DAY, HOUR, MAX_BUCKETS, periods, window
from nexus_grpc.errors import InvalidArgument

NOW = 20_000 * DAY + 10 * HOUR + 30 * 60  # 10:30 UTC


def test_an_unset_window_is_the_last_seven_days():
    assert window(None, None, DAY, NOW) == (NOW - 7 * DAY, NOW)
    assert window(None, NOW - DAY, HOUR, NOW) == (NOW - 8 * DAY, NOW - DAY)


@pytest.mark.parametrize(
    ("start", "end", "bucket", "field", "words"),
    [
        (NOW, NOW, DAY, "start_time", "earlier than end_time"),
        (NOW, NOW - 1, DAY, "start_time", "earlier than end_time"),
        (-1.0, NOW, DAY, "start_time", "1970"),
        (NOW - 1000 * HOUR, NOW, HOUR, "start_time", "1001 hour buckets"),
        (NOW - 1000 * DAY - 1, NOW, DAY, "start_time", "day buckets, more than the 1000"),
    ],
)
def test_a_window_that_cannot_be_answered_is_invalid(start, end, bucket, field, words):
    with pytest.raises(InvalidArgument) as refused:
        window(start, end, bucket, NOW)
    assert words in refused.value.message
    assert refused.value.field == field


def test_the_largest_window_one_answer_holds_is_accepted():
    start = 20_000 * DAY - (MAX_BUCKETS - 1) * DAY
    assert window(start, 20_000 * DAY + 1, DAY, NOW)[0] == start


def test_every_bucket_of_the_window_is_there_and_the_ends_are_cut_to_it():
    start, end = NOW - 2 * HOUR, NOW  # 08:30 to 10:30: three hour buckets
    b = int(start // HOUR)
    stages = [
        StageBucket(b, "extraction", "ok", 2, 100, 10, 1.5, 0),
        StageBucket(b, "extraction", "timeout", 1, 0, 0, 120.0, 0),
        StageBucket(b + 2, "extraction", "ok", 1, 50, 5, 0.5, 1),
        StageBucket(b + 2, "selection", "ok", 1, 9, 1, 0.1, 0),
    ]
    activity = [ActivityBucket(b, episodes=3, entities=4), ActivityBucket(b + 2, memories_formed=1)]

    out, total = periods(start, end, HOUR, stages, activity)

    assert [(p.start, p.end) for p in out] == [
        (start, (b + 1) * HOUR),
        ((b + 1) * HOUR, (b + 2) * HOUR),
        ((b + 2) * HOUR, end),
    ]
    first = out[0].stages[0]
    assert (first.stage, first.calls, first.prompt_tokens, first.completion_tokens) == (
        "extraction", 3, 100, 10)  # fmt: skip
    assert first.outcomes == {"ok": 2, "timeout": 1}
    assert first.seconds == pytest.approx(121.5)
    assert out[1].stages == [] and out[1].episodes == 0
    assert [s.stage for s in out[2].stages] == ["extraction", "selection"]
    assert out[2].stages[0].estimated_calls == 1
    assert (total.start, total.end) == (start, end)
    assert [(s.stage, s.calls, s.prompt_tokens) for s in total.stages] == [
        ("extraction", 4, 150), ("selection", 1, 9)]  # fmt: skip
    assert (total.episodes, total.memories_formed, total.entities) == (3, 1, 4)
