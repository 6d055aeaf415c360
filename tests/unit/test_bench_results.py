"""``nexus-grpc bench``'s arithmetic and report (ops/against_server/bench.py), without a
server: percentiles, the --mix weights, the options refused before anything is called,
the figures a measured load becomes, the warning of an open loop that missed its rate,
and the table ``format_result`` prints.

(Runs against the fake in-process server and a real one, for what a run measures and
leaves behind: tests/e2e/client/test_bench.py.)"""

from __future__ import annotations

import argparse

import pytest

from nexus_grpc.loadtest.loop import Load, OpStats, Recorder, Schedule
from nexus_grpc.ops.against_server import bench
from nexus_grpc.ops.against_server.bench import (
    BenchError,
    BenchResult,
    add_arguments,
    format_result,
    main,
    parse_mix,
    percentile,
    run_bench,
)

#: Nothing listens here; every test below is refused or computed before a call.
NOWHERE = "127.0.0.1:1"


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_percentile_nearest_rank():
    values = sorted(float(i) for i in range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 95) == 95
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) == 0.0


def test_parse_mix():
    assert parse_mix("create=4,search=4,watch=1,health=1") == {
        "create": 4.0,
        "search": 4.0,
        "watch": 1.0,
        "health": 1.0,
    }
    with pytest.raises(BenchError):
        parse_mix("create=1,bogus=2")
    with pytest.raises(BenchError):
        parse_mix("create=0")


def test_a_mix_op_without_a_weight_weighs_one_and_a_bad_weight_is_named():
    assert parse_mix(" get , health=2 ,") == {"get": 1.0, "health": 2.0}
    with pytest.raises(BenchError, match="bad --mix weight in 'create=x'"):
        parse_mix("create=x")
    with pytest.raises(BenchError, match="negative --mix weight in 'watch=-1'"):
        parse_mix("health=1,watch=-1")
    with pytest.raises(BenchError, match="has no positive weight"):
        parse_mix(",")


def test_cli_main_bad_rpc(capsys):
    assert main(_parse(["--rpc", "nope"])) == 2
    assert "unknown --rpc" in capsys.readouterr().err


def test_cli_main_names_every_unknown_rpc_of_a_list(capsys):
    assert main(_parse(["--rpc", "health,nope,create_episode,also_not"])) == 2
    err = capsys.readouterr().err
    assert "unknown --rpc nope, also_not; expected health, create_episode" in err


@pytest.mark.parametrize(
    ("rpc", "options", "refusal"),
    [
        ("nope", {}, "unknown rpc 'nope'"),
        ("health", {"concurrency": 0}, "concurrency must be at least 1"),
        ("health", {"duration": 0.0}, "duration must be positive"),
        ("health", {"rps": 0.0}, "--rps must be positive"),
        ("search_episodes", {"mode": "fuzzy"}, "unknown search mode 'fuzzy'"),
        ("health", {"wait_backlog": -1.0}, "--wait-backlog must not be negative"),
        ("mixed", {"mix": "create=1,bogus=2"}, "unknown --mix op 'bogus'"),
    ],
)
async def test_options_are_refused_before_anything_is_called(rpc, options, refusal):
    given = {"concurrency": 2, "duration": 1.0, **options}
    concurrency, duration = given.pop("concurrency"), given.pop("duration")
    with pytest.raises(BenchError, match=refusal):
        await run_bench(NOWHERE, rpc, concurrency, duration, **given)


# --- a measured load as figures -----------------------------------------------------------

OPTS = {
    "query": None,
    "mode": "hybrid",
    "sessions": 8,
    "seed_episodes": 32,
    "limit": 10,
    "timeout": 10.0,
    "health_service": "",
    "seed": 1,
}


def _shape(rpc: str, weights: dict[str, float], *, rps: float | None = None) -> bench._Shape:
    return bench._Shape(rpc, "h:1", 1, 1.0, rps, 1, 0.0, weights)


def _figures(load: Load, shape: bench._Shape) -> BenchResult:
    return bench._result(bench._Run(load), shape, OPTS, "nexus-grpc bench", "2026-01-01T00:00:00")


def test_a_mixed_run_sums_its_ops_and_counts_failures_by_code():
    rec = Recorder()
    rec.record("create", 0.010, None)
    rec.record("create", 0.030, None)
    rec.record("search", 0.020, None, first=0.005)
    rec.record("search", 0.5, "DEADLINE_EXCEEDED")
    result = _figures(Load(rec, 2.0), _shape("mixed", {"create": 1.0, "search": 1.0, "get": 0.0}))
    assert (result.count, result.ok, result.errors) == (4, 3, {"DEADLINE_EXCEEDED": 1})
    assert result.rps == 2.0 and result.load == "closed"
    assert (result.min_ms, result.p50_ms, result.max_ms) == (10.0, 20.0, 30.0)
    assert set(result.ops) == {"create", "search"}  # a weight of 0 is no op
    assert result.ops["create"].count == 2 and result.ops["create"].first_item_count is None
    assert result.ops["search"].first_item_count == 1
    assert result.ops["search"].first_item_p50_ms == 5.0
    assert result.first_item_p50_ms == 5.0  # a streaming op is in the run
    assert result.options["mix"] == {"create": 1.0, "search": 1.0, "get": 0.0}
    assert result.options["seed_episodes"] == 32  # search needs them
    assert (result.started_rps, result.warnings) == (None, [])  # a closed loop has no schedule


def test_a_run_that_neither_searches_nor_gets_seeds_nothing():
    rec = Recorder()
    rec.record("create", 0.010, None)
    result = _figures(Load(rec, 1.0), _shape("create_episode", {"create": 1.0}))
    assert result.options["seed_episodes"] == 0 and result.options["mix"] is None
    assert result.first_item_p50_ms is None


def _open_loop(started: int, scheduled: int) -> BenchResult:
    rec = Recorder()
    for _ in range(3):
        rec.record("health", 0.002, None)
    schedule = Schedule(scheduled, started, [0.0, 0.1, 0.5, 0.8])
    return _figures(Load(rec, 1.0, schedule), _shape("health", {"health": 1.0}, rps=5000))


def test_an_open_loop_that_misses_its_rate_says_so():
    """One worker cannot start 5,000 calls a second: the run says the rate it
    reached, how late calls started, and that the latencies include the wait."""
    result = _open_loop(started=1200, scheduled=5000)
    [warning] = result.warnings
    assert result.load == "open" and result.rps_target == 5000
    assert result.started_rps == 1200.0 and result.started_rps < 0.9 * 5000
    assert (result.start_lag_p50_ms, result.start_lag_max_ms) == (100.0, 800.0)
    assert warning == (
        "the target rate was not reached: 5000 rps asked, 1200 a second started on schedule"
        " (1200 of 5000 calls) and 3.0 a second finished. Calls started up to 0.8s late"
        " (median 0.10s), waiting for one of the 1 workers (or the client's CPU), and the"
        " latencies above include that wait: raise --concurrency, or lower --rps"
    )
    assert f"{result.started_rps:g} a second started on schedule" in warning
    assert f"  WARNING: {warning}" in format_result(result)
    assert result.to_dict()["warnings"] == [warning]


def test_an_open_loop_that_kept_its_rate_warns_nothing():
    # 90% of the scheduled calls started in the window is keeping the rate.
    result = _open_loop(started=4500, scheduled=5000)
    assert result.started_rps == 4500.0 and result.warnings == []
    assert "WARNING" not in format_result(result)
    assert _open_loop(started=4499, scheduled=5000).warnings != []


# --- the table ------------------------------------------------------------------------------


def _result(**fields) -> BenchResult:
    base = {
        "rpc": "health",
        "target": "h:1",
        "concurrency": 4,
        "duration_s": 1.0,
        "elapsed_s": 1.0,
        "load": "closed",
        "rps_target": None,
        "channels": 1,
        "warmup_s": 0.2,
        "count": 10,
        "ok": 10,
        "rps": 10.0,
        "errors": {},
        "p50_ms": 1.0,
        "p95_ms": 2.0,
        "p99_ms": 3.0,
        "max_ms": 4.0,
        "mean_ms": 1.5,
        "min_ms": 0.5,
    }
    return BenchResult(**{**base, **fields})


def test_the_table_heads_with_the_load_and_has_one_row_for_a_single_rpc():
    lines = format_result(_result()).splitlines()
    assert lines[0] == "health @ h:1: closed loop, concurrency 4, 1 channel, 1s (+0.2s warmup)"
    assert lines[1] == "  requests 10  ok 10  errors 0  rps 10.0  elapsed 1.00s"
    assert lines[2].split() == ["op", "count", "rps", "p50", "ms", "p95", "ms", "p99", "ms",
                                "max", "ms", "1st", "p50", "1st", "p99"]  # fmt: skip
    assert lines[3].split() == ["health", "10", "10.0", "1.00", "2.00", "3.00", "4.00", "-", "-"]
    assert len(lines) == 4  # no errors, warnings or project: nothing more
    opened = format_result(_result(load="open", rps_target=50.0, channels=2)).splitlines()[0]
    assert opened.startswith("health @ h:1: open loop at 50 rps, concurrency 4, 2 channels, ")


def test_the_table_counts_errors_by_code():
    text = format_result(_result(ok=0, errors={"NOT_FOUND": 10}))
    assert "errors 10" in text.splitlines()[1]
    assert "  errors: NOT_FOUND=10" in text.splitlines()


def test_a_mixed_run_has_a_row_per_op_and_a_total():
    ops = {
        "create": OpStats("create", count=6, rps=6.0, p50_ms=1.0),
        "search": OpStats("search", count=4, rps=4.0, first_item_p50_ms=0.25),
    }
    rows = format_result(_result(rpc="mixed", ops=ops)).splitlines()[3:]
    assert [row.split()[0] for row in rows] == ["create", "search", "total"]
    assert rows[1].split()[-2:] == ["0.25", "-"]


def _project(**fields) -> dict:
    return {"id": 7, "name": "nexus-bench r1", "sessions": 2, "episodes": 5, "removed": False,
            **fields}  # fmt: skip


def test_a_kept_project_is_named_with_its_backlog_and_what_waits_for_an_llm():
    text = format_result(
        _result(
            project=_project(),
            backlog={"index:episodes": 1, "extract:episode": 5},
            backlog_needs_llm=["extract:episode"],
        )
    )
    assert text.splitlines()[-2:] == [
        "  kept: project 7 'nexus-bench r1' with 2 sessions, 5 episodes"
        " (without --keep a run removes its project when it ends)",
        "  backlog the run left queued: extract:episode 5 (waits for an LLM, which is off),"
        " index:episodes 1",
    ]


def test_a_removed_project_and_the_wait_for_the_backlog_are_said():
    text = format_result(_result(project=_project(removed=True), backlog_wait_s=1.5))
    assert text.splitlines()[-3:] == [
        "  removed: project 7 'nexus-bench r1' (2 sessions, 5 episodes)",
        "  waited 1.5s for the backlog",
        "  backlog the run left queued: none",
    ]


def test_a_server_without_projects_is_said_to_keep_the_run_outside_any():
    text = format_result(_result(project=_project(id=0, name="")))
    assert "  left behind: 2 sessions, 5 episodes outside any project" in text
