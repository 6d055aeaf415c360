"""What the agent hooks cost per event (``nexus-grpc hooks run``), as a host runs them.

One real server (``nexus-grpc serve``, its defaults: no LLM, so selection ranks
by meaning), a project filled through the hooks themselves (exchanges in
several sessions) and with memories of the project and of the user. Then, in
rounds, so every kind sees the same machine: a bare ``python -c pass``; the
hook's start-up (``hooks run`` given a payload it refuses at once: the
interpreter, ``nexus-grpc``'s entry point and every module a hook imports, no
call); and each event end to end (SessionStart, UserPromptSubmit, Stop), a
new process each time with the event's JSON on stdin, as Claude Code runs it.
Also the tokens of context each SessionStart and UserPromptSubmit added
(``agent_hooks.context.estimate_tokens``, the budget's own count).

    .venv/bin/python -m bench.agent_hooks [--runs 60] [--append docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from nexus_grpc.agent_hooks import run as hook_run
from nexus_grpc.agent_hooks.context import estimate_tokens
from nexus_grpc.agent_hooks.options import run_parser
from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as pb
from nexus_grpc.loadtest.launcher import ServerProcess

PROJECT = "bench-hooks"
USER = "bench-user"
NEXUS = str(Path(sys.executable).parent / "nexus-grpc")
TOPICS = [
    ("the staging database", "listens on port 5433 and is rebuilt every night"),
    ("the deploy script", "runs blue-green through scripts/deploy.sh"),
    ("the payment service", "retries webhooks three times with backoff"),
    ("the search index", "is rebuilt from SQLite by the reindex command"),
    ("the CI pipeline", "runs lint, type checks and the test suite on two cores"),
    ("the cache layer", "keeps sessions in Redis for thirty minutes"),
    ("the auth middleware", "checks bearer tokens against the key file"),
    ("the image build", "starts from Debian slim and copies the venv"),
]
PROMPTS = [
    "Which port does the staging database listen on?",
    "How do we deploy a new release?",
    "What happens when a payment webhook fails?",
    "How is the search index rebuilt?",
    "What does CI run on every push?",
    "How long are sessions cached?",
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def timed(argv: list[str], stdin: bytes, env: dict[str, str], cwd: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, check=False)
    wall = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()}")
    return wall, done.stdout.decode()


class _Stdin(io.TextIOWrapper):
    """A payload where the hook reads it (``sys.stdin.buffer``)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))


def in_process(argv: list[str], stdin: bytes) -> float:
    """One event through the hook's own code in this process (its modules already
    imported): the event's own cost, without the interpreter's start."""
    args = run_parser().parse_args(argv)
    saved = sys.stdin
    sys.stdin = _Stdin(stdin)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            started = time.perf_counter()
            hook_run.main(args)
            return (time.perf_counter() - started) * 1000
    finally:
        sys.stdin = saved


def context_tokens(stdout: str) -> int:
    if not stdout.strip():
        return 0
    return estimate_tokens(json.loads(stdout)["hookSpecificOutput"]["additionalContext"])


async def seed(target: str) -> None:
    async with NexusClient(target) as client:
        page = await client.list_projects(page_size=100)
        [project_id] = [p.id for p in page.projects if p.name == PROJECT]
        for i, (what, fact) in enumerate(TOPICS * 5):
            kind = pb.MEMORY_KIND_USER if i % 4 == 0 else pb.MEMORY_KIND_PROJECT
            text = f"{what.capitalize()} {fact} (note {i})"
            await client.create_memory(
                memory=pb.Memory(
                    kind=kind,
                    title=text,
                    content=text,
                    tier=pb.TIER_LONGTERM,
                    project_id=project_id,
                    user_id=USER if kind == pb.MEMORY_KIND_USER else "",
                )
            )


def run(runs: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        cwd = Path(tmp) / PROJECT
        home.mkdir()
        cwd.mkdir()
        env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
        os.environ["XDG_CACHE_HOME"] = env["XDG_CACHE_HOME"]  # the in-process runs' cache
        server = ServerProcess(Path(tmp) / "data").start()
        try:
            flags = ["--target", server.target, "--user", USER]
            argv = [NEXUS, "hooks", "run", "claude-code", *flags]
            sessions = [str(uuid.uuid4()) for _ in range(6)]
            for i, (what, fact) in enumerate(TOPICS * 3):
                stop = {
                    "session_id": sessions[i % len(sessions)],
                    "cwd": str(cwd),
                    "hook_event_name": "Stop",
                    "prompt": f"Note this about {what}: it {fact}.",
                    "prompt_id": f"seed-{i}",
                    "last_assistant_message": f"Noted: {what} {fact}.",
                }
                timed(argv, json.dumps(stop).encode(), env, str(cwd))
            asyncio.run(seed(server.target))
            server.wait_settled()

            kinds = ["python -c pass", "hook start-up", "SessionStart", "UserPromptSubmit", "Stop"]
            walls: dict[str, list[float]] = {k: [] for k in kinds}
            own: dict[str, list[float]] = {k: [] for k in kinds[2:]}
            tokens: dict[str, list[int]] = {"SessionStart": [], "UserPromptSubmit": []}
            now = str(uuid.uuid4())
            for i in range(runs + 3):  # the first three warm the page cache
                measured = i >= 3
                rounds = [
                    ("python -c pass", [sys.executable, "-c", "pass"], b""),
                    ("hook start-up", argv, b"{}"),
                ]
                payloads = {
                    "SessionStart": {"source": "startup"},
                    "UserPromptSubmit": {"prompt": PROMPTS[i % len(PROMPTS)]},
                    "Stop": {
                        "prompt": f"Round {i}: {PROMPTS[i % len(PROMPTS)]}",
                        "prompt_id": f"round-{i}",
                        "last_assistant_message": f"Round {i}: see the notes above.",
                    },
                }
                for event, extra in payloads.items():
                    payload = {"session_id": now, "cwd": str(cwd), "hook_event_name": event}
                    rounds.append((event, argv, json.dumps({**payload, **extra}).encode()))
                for kind, command, stdin in rounds:
                    wall, out = timed(command, stdin, env, str(cwd))
                    if measured:
                        walls[kind].append(wall)
                        if kind in tokens:
                            tokens[kind].append(context_tokens(out))
                    if kind in own:
                        if kind == "Stop":  # another prompt id: a new exchange, not a replay
                            stdin = stdin.replace(b'"round-', b'"in-process-')
                        ms = in_process(["claude-code", *flags], stdin)
                        if measured:
                            own[kind].append(ms)
        finally:
            server.stop()
    return {"walls": walls, "tokens": tokens, "own": own}


def load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg()) + " (1, 5, 15 min)"


def report(result: dict[str, object], command: str) -> str:
    walls: dict[str, list[float]] = result["walls"]  # type: ignore[assignment]
    tokens: dict[str, list[int]] = result["tokens"]  # type: ignore[assignment]
    own: dict[str, list[float]] = result["own"]  # type: ignore[assignment]
    bare = statistics.median(walls["python -c pass"])
    rows = []
    for kind, values in walls.items():
        p50 = statistics.median(values)
        mine = own.get(kind)
        inside = f"{statistics.median(mine):.1f} | {percentile(mine, 99):.1f}" if mine else " | "
        rows.append(
            f"| {kind} | {len(values)} | {p50:.0f} | {percentile(values, 99):.0f} |"
            f" {p50 / bare:.1f}× | {inside} |"
        )
    token_rows = [
        f"| {kind} | {statistics.median(v):.0f} | {max(v)} | {budget} |"
        for kind, v, budget in (
            ("SessionStart", tokens["SessionStart"], 1000),
            ("UserPromptSubmit", tokens["UserPromptSubmit"], 600),
        )
    ]
    return "\n".join(
        [
            "",
            "## Agent hooks: start-up and end-to-end latency per event (issue 46)",
            "",
            f"`{command}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, on this 2-core"
            " machine: the real server (its defaults, no LLM: SelectMemories ranks by meaning),"
            " a project of 24 exchanges in 6 sessions and 40 memories (a quarter of them the"
            " user's), and `nexus-grpc hooks run claude-code` started as a new process for each"
            " event, with the event's JSON on stdin, as the host starts it. The kinds run in"
            " rounds, so each sees the same machine; milliseconds of wall time from the"
            " process's start to its exit. Hook start-up is the interpreter, the entry point and"
            " every module a hook imports, with no call (a payload it refuses at once). The last"
            " two columns are the event's own work (a new channel, its calls, the context),"
            " timed inside the benchmark's process with the modules already imported, right"
            " after each process run: what the deadline (1,500 ms by default) bounds. p99 is"
            f" the 99th percentile by rank. Load average at the end: {load()}.",
            "",
            "| what | runs | p50 ms | p99 ms | p50 ÷ `python -c pass` | own work p50 ms |"
            " own work p99 ms |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            "Context added (tokens, as the budget counts them):",
            "",
            "| event | p50 tokens | most | budget (default) |",
            "|---|---|---|---|",
            *token_rows,
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="timed runs of each kind")
    parser.add_argument("--append", type=Path, help="also append the tables to this report")
    args = parser.parse_args()
    result = run(args.runs)
    command = ".venv/bin/python -m bench.agent_hooks" + (
        f" --runs {args.runs}" if args.runs != 60 else ""
    )
    text = report(result, command)
    print(text)
    if args.append is not None:
        with args.append.open("a") as out:
            out.write(text)


if __name__ == "__main__":
    main()
