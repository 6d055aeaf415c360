"""The README's quick start, run as written: `make run`, then doctor and the
Python snippet against it, so the first thing a new user runs cannot drift
(and the typed client's example beside it).

What changes: `make run` gets `LISTEN=127.0.0.1:0` (any free port; the port
it took is read from its log) and `DATA_DIR=` (a fresh directory), both of
which the README documents; the commands and the snippet get that address for
127.0.0.1:50051, and the virtualenv's place for `.venv/bin/`. The snippet runs
twice, as the README says it may: the second run finds the first's project."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

from nexus_grpc.client import NexusClient
from nexus_grpc.loadtest.launcher import PORT_LINE
from tests import readme

HEADING = "## Quick start"
ADDRESS = "127.0.0.1:50051"
BIN = Path(sys.executable).parent
STARTUP_S = 120.0


async def _projects(target: str) -> list[tuple[str, int]]:
    """Each project's name and how many sessions it holds."""
    async with NexusClient(target) as client:
        projects = (await client.list_projects(page_size=100)).projects
        return [
            (p.name, len((await client.list_sessions(project_id=p.id)).sessions))
            for p in projects
        ]


def commands(block: str) -> list[str]:
    """A shell block's commands, without their comments."""
    lines = (line.split("#", 1)[0].strip() for line in block.splitlines())
    return [line for line in lines if line]


def test_the_quick_start_runs_as_written(tmp_path):
    run_block, client_block = readme.blocks(HEADING, "sh")
    [snippet] = readme.blocks(HEADING, "python")
    assert commands(run_block) == ["make run"]
    assert (readme.ROOT / ".venv" / ".installed").exists(), "make run builds .venv first"

    where = ["LISTEN=127.0.0.1:0", f"DATA_DIR={tmp_path / 'data'}"]
    server = subprocess.Popen(
        [*shlex.split(commands(run_block)[0]), *where],
        cwd=readme.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NEXUS_LOG_LEVEL": "INFO"}, start_new_session=True,
    )  # fmt: skip
    log: list[str] = []
    port: list[int] = []
    serving = threading.Event()

    def pump() -> None:
        assert server.stderr is not None
        for line in server.stderr:
            log.append(line)
            found = PORT_LINE.search(line)
            if found:
                port.append(int(found.group(1)))
                serving.set()
        serving.set()  # it exited: stop waiting

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        # The port line is logged once the port is bound and health says SERVING.
        assert serving.wait(STARTUP_S) and port, "make run did not serve:\n" + "".join(log[-30:])
        target = f"127.0.0.1:{port[0]}"
        (tmp_path / "quickstart.py").write_text(snippet.replace(ADDRESS, target))
        outputs = []
        for command in commands(client_block):
            command = command.replace(ADDRESS, target).replace(".venv/bin/", f"{BIN}/")
            done = subprocess.run(
                shlex.split(command), cwd=tmp_path, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
            outputs.append(done.stdout)
        doctor, quickstart = outputs
        assert "state             SERVING" in doctor and "FAIL" not in doctor, doctor
        assert "off   ollama" in doctor, doctor
        lines = quickstart.splitlines()
        assert "[SearchSource.KEYWORD" in lines[0], quickstart  # and SEMANTIC once indexed
        assert "[postgres]" in lines[0].lower() and "[port]" in lines[0], quickstart
        assert lines[-1].startswith("0 memories: LLM_OFF: no LLM server is configured"), quickstart
        assert lines[-1].endswith("1 exchange waits for memory formation"), quickstart

        # Run again, it finds its project by name: one "quickstart", holding both runs'
        # conversations, and the second run's search finds both exchanges.
        again = subprocess.run(
            [sys.executable, "quickstart.py"], cwd=tmp_path, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        *hits, last = again.stdout.splitlines()
        assert len(hits) == 2 and all("[port] 5433" in hit for hit in hits), again.stdout
        assert last.endswith("2 exchanges wait for memory formation"), again.stdout
        assert asyncio.run(_projects(target)) == [("quickstart", 2)]

        # The typed client's own example, further down, runs against the same server.
        [example] = readme.blocks("## The typed clients", "python")
        (tmp_path / "example.py").write_text(example.replace("localhost:50051", target))
        done = subprocess.run(
            [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "[hello]" in done.stdout and "['page_size']" in done.stdout, done.stdout
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # make and the server it started
        server.wait(60)
        reader.join(10)
