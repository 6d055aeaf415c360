"""``nexus-grpc usage``: what the LLM cost, as a table in the terminal.

A client of ``GetUsage`` (client side: it imports nothing of the server). A
project is named as people name it (``--project NAME``, found in the key's
own tenant); without one the table is the key's whole tenant (an admin key
may name another with ``--tenant``).
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client import NexusClient
from nexus_grpc.client.name_lookup import find_project
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

_UNITS = {"m": 60, "h": 3_600, "d": 86_400, "w": 7 * 86_400}
_SINCE = re.compile(r"\A(\d+)([mhdw])\Z")
BUCKETS = {"hour": memory_pb2.USAGE_BUCKET_HOUR, "day": memory_pb2.USAGE_BUCKET_DAY}


class UsageError(ValueError):
    """A mistake in the command line, or a project that is not there."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project", default="", metavar="NAME", help="one project, by name (default: the tenant)"
    )
    parser.add_argument(
        "--tenant",
        default="",
        help="another tenant than the key's own (admin keys only; not with --project)",
    )
    parser.add_argument(
        "--since",
        default="7d",
        help="how far back: a number and m, h, d or w (default: 7d)",
    )
    parser.add_argument(
        "--bucket",
        choices=sorted(BUCKETS),
        default="day",
        help="rows per UTC hour or day (default: day)",
    )


def since_seconds(value: str) -> int:
    """``7d`` as seconds; a ``UsageError`` naming the flag otherwise."""
    found = _SINCE.match(value.strip())
    if not found or int(found.group(1)) <= 0:
        raise UsageError(
            f"--since {value!r}: give a number and a unit, m, h, d or w (30m, 24h, 7d, 2w)"
        )
    return int(found.group(1)) * _UNITS[found.group(2)]


async def usage_table(
    client: NexusClient,
    *,
    project: str = "",
    tenant: str = "",
    since: str = "7d",
    bucket: str = "day",
    now: float | None = None,
) -> str:
    """The table ``nexus-grpc usage`` prints."""
    if project and tenant:
        raise UsageError("--project or --tenant, not both: a project names its tenant")
    back = since_seconds(since)
    end = time.time() if now is None else now
    project_id = 0
    if project:
        found = await find_project(client, project)
        if found is None:
            raise UsageError(f"no project named {project!r} in this key's tenant")
        project_id = found
    start = Timestamp()
    start.FromNanoseconds(int((end - back) * 1e9))
    stop = Timestamp()
    stop.FromNanoseconds(int(end * 1e9))
    report = await client.get_usage(
        project_id=project_id,
        tenant=tenant,
        start_time=start,
        end_time=stop,
        bucket=BUCKETS[bucket],
    )
    return format_report(report, project)


def _when(ts: Timestamp, hours: bool = True) -> str:
    at = datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, UTC)
    return at.strftime("%Y-%m-%d %H:%M") if hours else at.strftime("%Y-%m-%d")


def _instant(ts: Timestamp) -> str:
    """A window's end or start to the second: cut to the minute, a window
    ending just after a day began read as ending before it, above that
    day's row."""
    at = datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S")


def _n(value: float) -> str:
    return f"{value:,.0f}"


def format_report(report: memory_pb2.GetUsageResponse, project: str = "") -> str:
    whose = f"tenant {report.tenant!r}"
    if report.project_id:
        whose += f", project {project!r} ({report.project_id})" if project else (
            f", project {report.project_id}"
        )
    if report.users:
        whose += f", the work for {', '.join(repr(u) for u in report.users)}"
    hourly = report.bucket == memory_pb2.USAGE_BUCKET_HOUR
    lines = [
        f"LLM usage of {whose}, {_instant(report.start_time)} to"
        f" {_instant(report.end_time)} UTC",
    ]
    lines += budget_lines(report.budget, mine=bool(report.users))
    lines.append("")
    header = ("stage", "calls", "prompt tok", "compl. tok", "seconds", "outcomes")
    rows = [
        (
            s.stage,
            _n(s.calls),
            _n(s.prompt_tokens) + ("~" if s.estimated_calls else ""),
            _n(s.completion_tokens) + ("~" if s.estimated_calls else ""),
            f"{s.seconds:,.1f}",
            ", ".join(f"{k} {v}" for k, v in sorted(s.outcomes.items())),
        )
        for s in report.total.stages
    ]
    total = report.total
    calls = sum(s.calls for s in total.stages)
    prompt = sum(s.prompt_tokens for s in total.stages)
    completion = sum(s.completion_tokens for s in total.stages)
    rows.append(
        ("total", _n(calls), _n(prompt), _n(completion),
         f"{sum(s.seconds for s in total.stages):,.1f}", "")
    )  # fmt: skip
    lines += _table(header, rows, frozenset({0, 5}))
    if any(s.estimated_calls for s in total.stages):
        lines.append("~: some calls' tokens are estimated (the server did not count them)")
    lines.append("")
    per = ""
    if total.episodes:
        per = (
            f"; per episode: {calls / total.episodes:,.2f} calls,"
            f" {(prompt + completion) / total.episodes:,.0f} tokens"
        )
    lines.append(
        f"episodes {_n(total.episodes)}, memories formed {_n(total.memories_formed)},"
        f" entities written {_n(total.entities)}{per}"
    )
    busy = [
        b for b in report.buckets if b.stages or b.episodes or b.memories_formed or b.entities
    ]
    if busy:
        lines.append("")
        lines += _table(
            ("hour" if hourly else "day", "calls", "tokens", "episodes", "memories", "entities"),
            [
                (
                    _when(b.start_time, hourly),
                    _n(sum(s.calls for s in b.stages)),
                    _n(sum(s.prompt_tokens + s.completion_tokens for s in b.stages)),
                    _n(b.episodes),
                    _n(b.memories_formed),
                    _n(b.entities),
                )
                for b in busy
            ],
        )
    return "\n".join(lines)


def budget_lines(budget: memory_pb2.TenantBudget, *, mine: bool = False) -> list[str]:
    """Today's spend against the tenant's budget, then each user's line.
    ``mine``: the key may act only for some users, and the spend is their
    work's."""
    resets = f"resets {_when(budget.resets_at)} UTC"
    spent = _n(budget.llm_tokens_today)
    whose = " by this key's users' work" if mine else ""
    if not budget.llm_tokens_per_day:
        lines = [f"today: {spent} tokens spent{whose} (no daily budget)"]
    elif budget.exhausted:
        lines = [
            f"today: the budget of {_n(budget.llm_tokens_per_day)} tokens is spent"
            + (f" ({spent} by this key's users' work)" if mine else f" ({spent} spent)")
            + f"; LLM work waits until it {resets}"
        ]
    elif mine:
        lines = [
            f"today: {spent} tokens spent by this key's users' work, of the tenant's"
            f" {_n(budget.llm_tokens_per_day)} a day (not spent; {resets})"
        ]
    else:
        left = max(0, budget.llm_tokens_per_day - budget.llm_tokens_today)
        lines = [
            f"today: {spent} of {_n(budget.llm_tokens_per_day)} tokens spent,"
            f" {_n(left)} left ({resets})"
        ]
    share = budget.llm_tokens_per_day_per_user
    for user in budget.users:
        if share:
            state = (
                "spent: their LLM work waits"
                if user.exhausted
                else f"{_n(max(0, share - user.llm_tokens_today))} left"
            )
            lines.append(
                f"  user {user.user_id!r}: {_n(user.llm_tokens_today)} of {_n(share)}"
                f" tokens a user ({state})"
            )
        else:
            lines.append(f"  user {user.user_id!r}: {_n(user.llm_tokens_today)} tokens")
    return lines


def _table(
    header: tuple[str, ...], rows: Sequence[tuple[str, ...]], left: frozenset[int] = frozenset({0})
) -> list[str]:
    """Columns padded to their widest cell: text to the left, numbers to the right."""
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        cells = [
            cell.ljust(w) if i in left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [line(header), *(line(r) for r in rows)]
