"""The LLM usage chart of /status: tokens per bucket, stacked by stage.

Its geometry is computed here from the page's view (GetUsage as plain data)
and drawn by the template as inline SVG: no script, nothing downloaded, and
the page's tables beside it hold the same figures as text.  The JSON twin
carries the usage itself, not this drawing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["tokens_chart"]

WIDTH, HEIGHT = 960, 260
LEFT, RIGHT, TOP, BOTTOM = 72, 12, 12, 36
#: Stage colours (console.css's ``.s0`` .. ``.s7``), in the order of the
#: window's stages; a ninth stage takes the first colour again.
COLOURS = 8
#: At most this many x-axis labels; the rest of the bars go unlabelled.
MAX_LABELS = 12
#: Steps of the y axis, times a power of ten.
_STEPS = (1, 2, 2.5, 5)


def tokens(stage: Mapping[str, Any]) -> int:
    return int(stage["prompt_tokens"]) + int(stage["completion_tokens"])


def axis_top(value: int) -> tuple[int, int]:
    """The y axis's top and step: at most 5 round steps that reach ``value``."""
    if value <= 0:
        return 1, 1
    power = 10 ** max(0, math.floor(math.log10(value / 5)))
    for scale in (power, power * 10):
        for s in _STEPS:
            step = s * scale
            if step == int(step) and math.ceil(value / step) <= 5:
                return int(math.ceil(value / step) * step), int(step)
    raise AssertionError("unreachable: 10 x power is always a step that fits")


def _label(start: str, hourly: bool) -> str:
    """``2026-11-27T14:00:00Z`` as ``14:00`` (hours) or ``11-27`` (days)."""
    return start[11:16] if hourly else start[5:10]


def tokens_chart(usage: Mapping[str, Any]) -> dict[str, Any]:
    """What the template draws: one bar per bucket, a segment per stage
    (prompt and completion tokens together), the y axis's ticks, the legend."""
    stages = [s["stage"] for s in usage["total"]["stages"]]
    colour = {name: f"s{i % COLOURS}" for i, name in enumerate(stages)}
    buckets = usage["buckets"]
    hourly = usage["bucket"] == "hour"
    totals = [sum(tokens(s) for s in b["stages"]) for b in buckets]
    top, step = axis_top(max(totals, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(buckets), 1)
    width = slot * 0.72
    every = max(1, math.ceil(len(buckets) / MAX_LABELS))
    bars = []
    for i, (bucket, total) in enumerate(zip(buckets, totals, strict=True)):
        x = LEFT + i * slot + (slot - width) / 2
        y: float = TOP + plot_h
        by_stage = {s["stage"]: s for s in bucket["stages"]}
        segments = []
        for name in stages:
            found = by_stage.get(name)
            if found is None or not tokens(found):
                continue
            height = tokens(found) / top * plot_h
            y -= height
            segments.append(
                {
                    "stage": name,
                    "tokens": tokens(found),
                    "calls": found["calls"],
                    "class": colour[name],
                    "x": round(x, 1),
                    "y": round(y, 1),
                    "width": round(width, 1),
                    "height": round(height, 1),
                }
            )
        bars.append(
            {
                "start": bucket["start_time"],
                "label": _label(bucket["start_time"] or "", hourly) if i % every == 0 else "",
                "centre": round(x + width / 2, 1),
                "tokens": total,
                "calls": sum(s["calls"] for s in bucket["stages"]),
                "segments": segments,
            }
        )
    ticks = [
        {"value": v, "y": round(TOP + plot_h - v / top * plot_h, 1)}
        for v in range(0, top + 1, step)
    ]
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "top": TOP,
        "bottom": TOP + plot_h,
        "label_y": TOP + plot_h + 18,
        "bars": bars,
        "ticks": ticks,
        "legend": [{"stage": name, "class": colour[name]} for name in stages],
        "tokens": sum(totals),
        "hourly": hourly,
    }
