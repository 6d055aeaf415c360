"""A reader that stops early (``nexus-grpc doctor | head``) is not a failure: the
command exits 0, without a traceback, whether the closed pipe shows at its last
flush or while it still writes, and a broken pipe that is not stdout's is still
an error."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

NEXUS = str(Path(sys.executable).with_name("nexus-grpc"))


def run_into_a_closed_pipe(*args: str) -> tuple[int, str]:
    """The command with its stdout a pipe whose reader has already gone, as
    ``| head`` leaves it once it has read its lines; its status and stderr."""
    proc = subprocess.Popen(
        [NEXUS, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes a byte
    err = proc.stderr.read()
    return proc.wait(timeout=120), err


async def test_doctor_into_a_closed_pipe_exits_quietly(harness):
    """doctor's report is small: the closed pipe shows when it is flushed."""
    status, err = await asyncio.to_thread(
        run_into_a_closed_pipe, "doctor", "--target", harness.target
    )
    assert (status, err) == (0, "")


async def test_an_export_cut_short_by_its_reader_exits_quietly(harness):
    """An export to stdout larger than a buffer meets the closed pipe while it
    writes, inside the command."""
    project = await harness.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="long"))
    )
    session = await harness.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    for i in range(40):
        await harness.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id, user_message=f"line {i} " + "x" * 400, ai_response="ok"
            )
        )
    status, err = await asyncio.to_thread(
        run_into_a_closed_pipe, "export", str(project.id), "--target", harness.target
    )
    assert (status, err) == (0, "")


def test_a_broken_pipe_that_is_not_stdouts_is_still_an_error(tmp_path):
    """Only stdout's reader going away is quiet: the same error from another
    pipe is the failure it was."""
    script = tmp_path / "other_pipe.py"
    script.write_text(
        "import sys\n"
        "from nexus_grpc import cli\n"
        "def broken(args):\n"
        "    raise BrokenPipeError(32, 'Broken pipe')\n"
        "cli.cmd_doctor = broken\n"
        "sys.exit(cli.main(['doctor']))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "BrokenPipeError" in done.stderr
