"""The LLM usage chart of /status (console/usage_chart.py), from GetUsage as
plain data with no server: the y axis's round steps, one bar per bucket
stacked by stage in the window's stage order, labels thinned to a dozen, and
stage colours that cycle. The page drawing it from a real server's usage stays
in tests/e2e/console/test_console_usage.py."""

from __future__ import annotations

import pytest

from nexus_grpc.console.usage_chart import COLOURS, axis_top, tokens_chart

HOURS = [f"2026-11-27T{h:02d}:00:00Z" for h in range(24)]


def stage(name: str, prompt: int, completion: int, calls: int = 1) -> dict:
    return {"stage": name, "prompt_tokens": prompt, "completion_tokens": completion,
            "calls": calls}  # fmt: skip


def usage(starts: list[str], last: list[dict], bucket: str = "hour") -> dict:
    """A window whose calls all fall in its last bucket."""
    buckets = [{"start_time": s, "stages": []} for s in starts]
    buckets[-1]["stages"] = last
    return {"bucket": bucket, "buckets": buckets, "total": {"stages": last}}


@pytest.mark.parametrize(
    ("value", "top_and_step"),
    [(0, (1, 1)), (3, (3, 1)), (7, (8, 2)), (10, (10, 2)), (1234, (1250, 250)),
     (9_000_001, (10_000_000, 2_000_000))],
)  # fmt: skip
def test_the_y_axis_reaches_the_largest_bar_in_at_most_five_round_steps(value, top_and_step):
    top, step = axis_top(value)
    assert (top, step) == top_and_step
    assert top >= value and top // step <= 5


def test_a_day_by_hour_is_one_bar_an_hour_stacked_by_stage():
    both = [stage("extraction", 600, 100, calls=2), stage("summary", 400, 134)]
    chart = tokens_chart(usage(HOURS, both))
    assert chart["hourly"] and chart["tokens"] == 1234
    assert [b["tokens"] for b in chart["bars"]] == [0] * 23 + [1234]
    assert [b["calls"] for b in chart["bars"]][-1] == 3
    assert all(b["segments"] == [] for b in chart["bars"][:-1])
    extraction, summary = chart["bars"][-1]["segments"]
    # Stacked from the axis up in the window's stage order, to the axis's top (1250).
    assert (extraction["stage"], extraction["class"]) == ("extraction", "s0")
    assert (summary["stage"], summary["class"]) == ("summary", "s1")
    assert extraction["height"] == round(700 / 1250 * 212, 1)
    assert extraction["y"] == round(chart["bottom"] - 700 / 1250 * 212, 1)
    assert summary["y"] == round(chart["bottom"] - 1234 / 1250 * 212, 1)
    assert [t["value"] for t in chart["ticks"]] == [0, 250, 500, 750, 1000, 1250]
    assert chart["legend"] == [
        {"stage": "extraction", "class": "s0"},
        {"stage": "summary", "class": "s1"},
    ]
    # 24 bars, at most 12 labels: every other hour, as hours.
    labels = [b["label"] for b in chart["bars"]]
    assert labels[:3] == ["00:00", "", "02:00"] and sum(1 for x in labels if x) == 12


def test_a_week_by_day_labels_each_day_as_its_date():
    days = [f"2026-11-{d:02d}T00:00:00Z" for d in range(21, 28)]
    chart = tokens_chart(usage(days, [stage("extraction", 5, 5)], bucket="day"))
    assert not chart["hourly"]
    assert [b["label"] for b in chart["bars"]] == [f"11-{d:02d}" for d in range(21, 28)]


def test_an_empty_window_draws_empty_bars_on_a_unit_axis():
    chart = tokens_chart(usage(HOURS, []))
    assert chart["tokens"] == 0 and chart["legend"] == []
    assert all(b["segments"] == [] for b in chart["bars"])
    assert [t["value"] for t in chart["ticks"]] == [0, 1]


def test_a_stage_past_the_palette_takes_its_first_colour_again():
    many = [stage(f"stage{i}", 1, 0) for i in range(COLOURS + 1)]
    chart = tokens_chart(usage(HOURS, many))
    classes = [entry["class"] for entry in chart["legend"]]
    assert classes[:COLOURS] == [f"s{i}" for i in range(COLOURS)]
    assert classes[COLOURS] == "s0"
