"""``nexus-grpc bench``'s decisions from its inputs
(nexus_grpc/ops/against_server/bench.py), on plain values: the options it
refuses before calling anything, the mix's weights, when an open loop
missed its rate and how it says so, and the report's lines (the table, the
errors, what the run left on the server). Runs against a real server are
tests/e2e/client/test_bench.py's (which also holds parse_mix's first cases
and the unknown --rpc refusal)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from nexus_grpc.loadtest.loop import Load, OpStats, Recorder, Schedule
from nexus_grpc.ops.against_server import bench
from nexus_grpc.ops.against_server.bench import (
    BenchError,
    BenchResult,
    _aftermath,
    _check_options,
    _kept_schedule,
    _rate_warning,
    format_result,
    parse_mix,
)


def _check(**kw: Any) -> None:
    options = {"rpc": "health", "concurrency": 1, "duration": 1.0, "rps": None}
    options |= {"mode": "hybrid", "wait": None} | kw
    _check_options(**options)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"rpc": "ping"}, "unknown rpc 'ping'; expected one of health, create_episode"),
        ({"concurrency": 0}, "concurrency must be at least 1"),
        ({"duration": 0.0}, "duration must be positive"),
        ({"rps": 0.0}, "--rps must be positive"),
        ({"mode": "fuzzy"}, "unknown search mode 'fuzzy'"),
        ({"wait": -1.0}, "--wait-backlog must not be negative"),
    ],
)
def test_an_option_out_of_range_is_refused_naming_it(bad, says):
    with pytest.raises(BenchError) as refused:
        _check(**bad)
    assert str(refused.value).startswith(says)


def test_options_in_range_pass_the_check():
    _check(rpc="mixed", concurrency=4, duration=0.5, rps=10.0, mode="keyword", wait=0.0)


def test_a_mix_op_without_a_weight_weighs_one_and_blanks_are_ignored():
    assert parse_mix(" create , search=2.5,,") == {"create": 1.0, "search": 2.5}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("create=x", "bad --mix weight in 'create=x'"),
        ("create=-1", "negative --mix weight in 'create=-1'"),
        ("", "--mix '' has no positive weight"),
        ("create=0,search=0", "has no positive weight"),
    ],
)
def test_a_mix_without_a_usable_weight_is_refused(text, says):
    with pytest.raises(BenchError, match=says.replace("-", r"\-")):
        parse_mix(text)


def _open_loop(scheduled: int, started: int, lateness: list[float]) -> Load:
    return Load(Recorder(), elapsed=10.0, schedule=Schedule(scheduled, started, lateness))


def test_a_closed_loop_has_no_schedule_to_report():
    assert _kept_schedule(Load(Recorder(), elapsed=10.0), 10.0) is None


def test_an_open_loops_schedule_is_the_started_rate_and_the_start_lag_in_ms():
    kept = _kept_schedule(_open_loop(100, 90, [0.001, 0.002, 0.5]), duration=10.0)
    assert kept == (9.0, 2.0, 500.0, 90, 100)
    assert _kept_schedule(_open_loop(10, 0, []), duration=10.0) == (0.0, 0.0, 0.0, 0, 10)


def test_an_open_loop_that_started_nine_tenths_on_time_kept_its_rate():
    assert _rate_warning(10.0, 4, 9.0, (9.0, 2.0, 500.0, 90, 100)) is None
    assert _rate_warning(None, 4, 9.0, (9.0, 2.0, 500.0, 10, 100)) is None  # closed loop


def test_a_missed_rate_says_what_was_asked_what_started_and_what_to_change():
    warning = _rate_warning(50.0, 4, 8.04, (8.9, 250.0, 1500.0, 89, 100))
    assert warning == (
        "the target rate was not reached: 50 rps asked, 8.9 a second started on schedule"
        " (89 of 100 calls) and 8.0 a second finished. Calls started up to 1.5s late"
        " (median 0.25s), waiting for one of the 4 workers (or the client's CPU), and the"
        " latencies above include that wait: raise --concurrency, or lower --rps"
    )


def _result(**kw: Any) -> BenchResult:
    values: dict[str, Any] = {
        "rpc": "health",
        "target": "127.0.0.1:50051",
        "concurrency": 2,
        "duration_s": 5.0,
        "elapsed_s": 5.004,
        "load": "closed",
        "rps_target": None,
        "channels": 1,
        "warmup_s": 1.0,
        "count": 100,
        "ok": 98,
        "rps": 20.0,
        "errors": {},
        "p50_ms": 1.0,
        "p95_ms": 2.0,
        "p99_ms": 3.0,
        "max_ms": 4.0,
        "mean_ms": 1.5,
        "min_ms": 0.5,
    }
    return BenchResult(**(values | kw))


def test_the_report_heads_with_the_load_and_the_counts():
    lines = format_result(_result(errors={"UNAVAILABLE": 2})).splitlines()
    assert lines[0] == (
        "health @ 127.0.0.1:50051: closed loop, concurrency 2, 1 channel, 5s (+1s warmup)"
    )
    assert lines[1].split() == "requests 100 ok 98 errors 2 rps 20.0 elapsed 5.00s".split()
    assert lines[3].split() == ["health", "100", "20.0", "1.00", "2.00", "3.00", "4.00", "-", "-"]
    assert lines[4] == "  errors: UNAVAILABLE=2"
    assert len(lines) == 5  # no warnings, no project: nothing more


def test_an_open_loop_on_channels_says_its_rate_and_warns():
    result = _result(load="open", rps_target=50.0, channels=3, warnings=["rate missed"])
    lines = format_result(result).splitlines()
    assert lines[0].startswith(
        "health @ 127.0.0.1:50051: open loop at 50 rps, concurrency 2, 3 channels"
    )
    assert lines[-1] == "  WARNING: rate missed"


def test_a_mixed_run_has_a_row_per_op_and_a_total():
    ops = {
        "create": OpStats("create", count=60, rps=12.0, first_item_p50_ms=None),
        "watch": OpStats("watch", count=40, rps=8.0, first_item_p50_ms=3.25, first_item_p99_ms=9.5),
    }
    lines = format_result(_result(rpc="mixed", ops=ops)).splitlines()
    assert [line.split()[0] for line in lines[3:6]] == ["create", "watch", "total"]
    assert lines[4].split()[-2:] == ["3.25", "9.50"]


def _project(**kw: Any) -> dict[str, Any]:
    return {"id": 7, "name": "bench 1a2b", "sessions": 8, "episodes": 32, "removed": True} | kw


def test_a_run_that_wrote_nothing_says_nothing_of_what_it_left():
    assert _aftermath(_result()) == []


def test_a_removed_project_is_named_with_what_it_held():
    lines = _aftermath(_result(project=_project()))
    assert lines == [
        "  removed: project 7 'bench 1a2b' (8 sessions, 32 episodes)",
        "  backlog the run left queued: none",
    ]


def test_a_kept_project_says_how_to_have_it_removed():
    [kept, _] = _aftermath(_result(project=_project(removed=False)))
    assert kept == (
        "  kept: project 7 'bench 1a2b' with 8 sessions, 32 episodes"
        " (without --keep a run removes its project when it ends)"
    )


def test_a_server_without_projects_leaves_the_rows_outside_any():
    [left, _] = _aftermath(_result(project=_project(id=0)))
    assert left == (
        "  left behind: 8 sessions, 32 episodes outside any project (the server has no projects)"
    )


def test_the_backlog_names_each_queue_and_those_waiting_for_an_llm_that_is_off():
    result = _result(
        project=_project(),
        backlog={"index:episodes": 3, "extract:episodes": 32},
        backlog_needs_llm=["extract:episodes"],
        backlog_wait_s=2.5,
    )
    assert _aftermath(result)[1:] == [
        "  waited 2.5s for the backlog",
        "  backlog the run left queued: extract:episodes 32 (waits for an LLM, which is off),"
        " index:episodes 3",
    ]


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_an_empty_rpc_list_is_refused_with_status_2(capsys):
    assert bench.main(_args("--rpc", " , ")) == 2
    err = capsys.readouterr().err
    assert "nexus-grpc bench: unknown --rpc ' , '; expected health, create_episode" in err


def test_a_cacert_that_cannot_be_read_is_refused_with_status_2(tmp_path, capsys):
    missing = tmp_path / "ca.pem"
    assert bench.main(_args("--cacert", str(missing))) == 2
    assert capsys.readouterr().err.startswith("nexus-grpc bench: [Errno 2]")
