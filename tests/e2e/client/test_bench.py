"""nexus-grpc bench against the fake in-process server of tests/fake_server.py, and
against a real one for what a run leaves behind.

The arithmetic and the report without a server (percentiles, --mix, the options refused
before a call, a load's figures, the missed-rate warning's words, the table):
tests/unit/test_bench_results.py."""

from __future__ import annotations

import argparse
import asyncio
import io
import json

import grpc
import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.bench import (
    BenchError,
    BenchResult,
    add_arguments,
    format_result,
    main,
    run_bench,
)
from tests.fake_server import free_port, running_server


@pytest.fixture
async def target():
    async with running_server() as (tgt, _memory):
        yield tgt


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def _assert_sane(result: BenchResult) -> None:
    assert result.count > 0
    assert result.ok == result.count
    assert result.errors == {}
    assert 0 < result.min_ms <= result.p50_ms <= result.p95_ms <= result.p99_ms <= result.max_ms
    assert result.rps > 0


async def test_health_closed_loop(target):
    result = await run_bench(target, "health", 4, 1.0)
    _assert_sane(result)
    assert result.load == "closed" and result.channels == 1
    assert result.first_item_p50_ms is None
    assert "health" in format_result(result)


async def test_create_episode_closed_loop(target):
    async with running_server() as (tgt, memory):
        result = await run_bench(tgt, "create_episode", 4, 1.0, sessions=3)
    _assert_sane(result)
    assert len(memory.sessions) == 3
    assert len(memory.episodes) == result.count  # unique request id per call
    texts = [e.user_message for e in memory.episodes.values()]
    assert 250 <= sum(map(len, texts)) / len(texts) <= 400


async def test_search_and_get(target):
    search = await run_bench(target, "search_episodes", 4, 1.0, mode="keyword")
    _assert_sane(search)
    assert search.first_item_p50_ms is not None
    assert search.first_item_p50_ms <= search.first_item_p99_ms <= search.max_ms
    assert search.ops["search"].first_item_count > 0

    get = await run_bench(target, "get_episode", 4, 1.0, seed_episodes=5)
    _assert_sane(get)


async def test_mixed(target):
    result = await run_bench(
        target, "mixed", 8, 1.5, mix="create=4,search=4,watch=1,health=1", warmup=0.2
    )
    assert result.errors == {}
    # Hundreds of picks in the first half second: a watch is among them
    # (P(none) < 1e-20), and it ends inside the run.
    assert set(result.ops) == {"create", "search", "watch", "health"}
    assert sum(op.count for op in result.ops.values()) == result.count
    # The fake never emits: each watch waits its 1 s.
    assert result.ops["watch"].p50_ms >= 900
    text = format_result(result)
    assert "total" in text and "create" in text


async def test_errors_are_counted_by_code(target):
    result = await run_bench(target, "health", 4, 1.0, health_service="no.such.Service")
    assert result.count > 0
    assert result.ok == 0
    assert result.errors == {"NOT_FOUND": result.count}
    assert "NOT_FOUND" in format_result(result)


async def test_open_loop_rate(target):
    result = await run_bench(target, "health", 4, 2.0, rps=50)
    assert result.load == "open" and result.rps_target == 50
    assert 25 <= result.rps <= 75
    assert 50 <= result.count <= 150
    assert result.errors == {}
    # It kept the rate: every call started on time, and nothing warns.
    assert result.started_rps == 50 and result.warnings == []
    assert "WARNING" not in format_result(result)


async def test_an_open_loop_that_misses_its_rate_says_so(target):
    """One worker cannot start 5,000 calls a second: the run says the rate it
    reached, how late calls started, and that the latencies include the wait."""
    result = await run_bench(target, "health", 1, 1.0, rps=5000)
    [warning] = result.warnings
    assert result.started_rps is not None and result.started_rps < 0.9 * 5000
    assert result.start_lag_max_ms is not None and result.start_lag_max_ms > 100
    assert warning.startswith("the target rate was not reached: 5000 rps asked, ")
    assert f"{result.started_rps:g} a second started on schedule" in warning
    assert "one of the 1 workers" in warning and "raise --concurrency, or lower --rps" in warning
    assert f"  WARNING: {warning}" in format_result(result)
    assert result.to_dict()["warnings"] == [warning]


async def test_setup_failure_raises():
    with pytest.raises(BenchError, match="cannot connect"):
        await run_bench(f"127.0.0.1:{free_port()}", "health", 2, 1.0, connect_timeout=0.3)


async def test_cli_main_writes_json(target, tmp_path, capsys):
    path = tmp_path / "out.json"
    args = _parse(
        [
            "--target",
            target,
            "--rpc",
            "health,create_episode",
            "-c",
            "4",
            "-d",
            "0.5",
            "--warmup",
            "0.2",
            "--sessions",
            "2",
            "--json",
            str(path),
            "--quiet",
        ]
    )
    # main() runs its own event loop, so it goes to a thread while this loop serves.
    assert await asyncio.to_thread(main, args) == 0
    runs = json.loads(path.read_text())
    assert [run["rpc"] for run in runs] == ["health", "create_episode"]
    for run in runs:
        assert run["count"] > 0 and run["errors"] == {}
        assert run["concurrency"] == 4 and run["duration_s"] == 0.5
        assert run["command"] and run["timestamp"]
        assert run["p50_ms"] <= run["p95_ms"] <= run["p99_ms"]
    out = capsys.readouterr().out
    assert "health @" in out and "create_episode @" in out


async def test_cli_main_reports_errors_and_progress(target, capsys):
    args = _parse(
        [
            "--target",
            target,
            "--rpc",
            "health",
            "-c",
            "2",
            "-d",
            "1.2",
            "--warmup",
            "0",
            "--health-service",
            "nope",
        ]
    )
    assert await asyncio.to_thread(main, args) == 1
    captured = capsys.readouterr()
    assert "NOT_FOUND" in captured.out
    assert "requests" in captured.err and "rps" in captured.err  # progress lines


def test_cli_main_unreachable(capsys):
    args = _parse(["--target", f"127.0.0.1:{free_port()}", "--connect-timeout", "0.3"])
    assert main(args) == 2
    assert "cannot connect" in capsys.readouterr().err


# --- what a run leaves behind, against the real server ---------------------------------


async def _episodes_in(harness, project_id: int) -> int:
    return await harness.app.db.read_sql(
        lambda c: c.execute(
            "SELECT COUNT(*) FROM episodes e JOIN sessions s ON s.id = e.session_id"
            " WHERE s.project_id = ?",
            (project_id,),
        ).fetchone()[0]
    )


async def test_a_run_writes_into_its_own_project_and_says_what_it_left(harness):
    progress = io.StringIO()
    result = await run_bench(
        harness.target, "create_episode", 2, 0.5, sessions=2, warmup=0.1, progress=progress
    )
    project = result.project
    assert project is not None and project["removed"] is False
    assert project["name"].startswith("nexus-bench ") and project["sessions"] == 2
    assert f"writing into project {project['id']} {project['name']!r}" in progress.getvalue()
    # Every episode it stored is in that project, and counted.
    assert project["episodes"] == await _episodes_in(harness, project["id"]) > 0
    sessions = await harness.memory.ListSessions(
        memory_pb2.ListSessionsRequest(project_id=project["id"])
    )
    assert len(sessions.sessions) == 2
    # No LLM: the extractions it queued wait for one, and the report says so.
    assert result.backlog["extract:episode"] == project["episodes"]
    assert "extract:episode" in result.backlog_needs_llm
    text = format_result(result)
    assert f"kept: project {project['id']}" in text and "without --keep" in text
    assert "extract:episode" in text and "waits for an LLM, which is off" in text


async def _nothing_left(harness) -> None:
    """No project, session or episode is on the server."""
    rows = await harness.app.db.read_sql(
        lambda c: [
            c.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("projects", "sessions", "episodes")
        ]
    )
    assert rows == [0, 0, 0]


@pytest.mark.parametrize(
    "documented",
    [
        ["--rpc", "create_episode"],
        ["--rpc", "search_episodes", "--mode", "keyword"],
        ["--rpc", "mixed", "--mix", "create=4,search=4,watch=1,health=1", "--rps", "40"],
    ],
)
async def test_every_command_the_readme_documents_removes_what_it_made(harness, documented):
    args = _parse(
        [
            "--target",
            harness.target,
            *documented,
            "-c",
            "4",
            "-d",
            "0.5",
            "--warmup",
            "0.1",
            "--sessions",
            "2",
            "--seed-episodes",
            "4",
            "--quiet",
        ]
    )
    assert await asyncio.to_thread(main, args) == 0
    await _nothing_left(harness)


async def test_keep_keeps_the_run_and_names_it(harness, capsys):
    args = _parse(["--target", harness.target, "--rpc", "create_episode", "-c", "2", "-d",
                   "0.3", "--warmup", "0", "--sessions", "2", "--keep", "--quiet"])  # fmt: skip
    assert await asyncio.to_thread(main, args) == 0
    [project] = (await harness.memory.ListProjects(memory_pb2.ListProjectsRequest())).projects
    assert project.name.startswith("nexus-bench ")
    assert f"kept: project {project.id} {project.name!r}" in capsys.readouterr().out


async def test_a_run_that_fails_after_making_its_project_removes_it(harness):
    """get_episode with no seed episodes stops after making the project and its
    sessions: they go all the same."""
    with pytest.raises(BenchError, match="no seed episodes to get"):
        await run_bench(harness.target, "get_episode", 2, 0.3, sessions=2, seed_episodes=0,
                        cleanup=True)  # fmt: skip
    await _nothing_left(harness)


async def test_cleanup_removes_the_project_and_wait_backlog_waits(harness):
    result = await run_bench(
        harness.target, "create_episode", 2, 0.5, sessions=2, warmup=0.1,
        cleanup=True, wait_backlog=60.0,
    )  # fmt: skip
    project = result.project
    assert project is not None and project["removed"] is True and project["episodes"] > 0
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await harness.memory.GetProject(memory_pb2.GetProjectRequest(id=project["id"]))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert await _episodes_in(harness, project["id"]) == 0
    left = await harness.app.db.read_sql(
        lambda c: c.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
    )
    assert left == 0
    # It waited for what could run (the index jobs): only the LLM's remain.
    assert result.backlog_wait_s is not None and result.backlog_wait_s < 60.0
    assert set(result.backlog) <= set(result.backlog_needs_llm)
    assert "index:episodes" not in result.backlog
    assert f"removed: project {project['id']}" in format_result(result)
