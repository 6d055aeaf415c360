"""What the agent-hook tests share: the hook and the hosts as subprocesses,
the episodes a hook recorded in an agent's session (``episodes_of``) and a
hung server (``Blackhole``) that every host's hook must give up on.

The hosts are the real CLIs from npm, pinned by clients/agent-hosts/package-lock.json
and installed into that folder by ``make agent-hosts`` (``npm ci``; ``make test``
and CI run it). Each runs in a home of its own under the test's tmp_path, with
its model API pointed at the protocol stand-in (tests/model_api_stub.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as pb
from nexus_grpc.session_names import session_external_id
from tests.model_api_stub import ModelAPIStub

ROOT = Path(__file__).resolve().parents[3]
HOSTS_BIN = ROOT / "clients" / "agent-hosts" / "node_modules" / ".bin"
VENV_BIN = Path(sys.executable).parent
NEXUS = str(VENV_BIN / "nexus-grpc")


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


async def run(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    stdin: bytes = b"",
    timeout: float = 120.0,  # noqa: ASYNC109 - a subprocess's own bound
) -> Ran:
    """``argv`` as a subprocess, without blocking the loop the harness serves on."""
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin), timeout)
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
        raise AssertionError(
            f"{argv[0]} ran past {timeout} s\nstdout: {out.decode()[-2000:]}"
            f"\nstderr: {err.decode()[-2000:]}"
        ) from None
    return Ran(process.returncode or 0, out.decode(), err.decode(), time.monotonic() - started)


def host_bin(name: str) -> str:
    path = HOSTS_BIN / name
    assert path.exists(), (
        f"{path} is missing: `make agent-hosts` installs the pinned agent CLIs"
        " (npm ci in clients/agent-hosts)"
    )
    return str(path)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git work tree named ``webshop``: the project name the hooks default to."""
    folder = tmp_path / "webshop"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


def base_env(home: Path) -> dict[str, str]:
    """A clean environment: the home under the test, PATH with node and the venv."""
    node = shutil.which("node")
    assert node, "the agent hosts need node on PATH"
    path = os.pathsep.join(
        dict.fromkeys([str(VENV_BIN), str(Path(node).parent), "/usr/bin", "/bin"])
    )
    return {
        "HOME": str(home),
        "PATH": path,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "USER": "dev",
        "LOGNAME": "dev",
    }


@pytest.fixture
def model_api():
    """The model APIs' stand-in; it answers every prompt with ``REPLY``."""
    with ModelAPIStub(reply=REPLY) as stub:
        yield stub


REPLY = "Understood; noted for later."


async def install(
    host: str, *, env: dict[str, str], cwd: Path, flags: list[str] | None = None
) -> Ran:
    ran = await run([NEXUS, "hooks", "install", host, *(flags or [])], env=env, cwd=cwd)
    assert ran.returncode == 0, ran.stderr
    return ran


async def hook(
    host: str,
    payload: dict,
    *,
    env: dict[str, str],
    cwd: Path,
    flags: list[str],
) -> Ran:
    """``nexus-grpc hooks run HOST`` with ``payload`` on stdin, as a host runs it."""
    return await run(
        [NEXUS, "hooks", "run", host, *flags],
        env=env,
        cwd=cwd,
        stdin=json.dumps(payload).encode(),
    )


def context_of(ran: Ran) -> str:
    """The additionalContext a hook answered ("" for none)."""
    if not ran.stdout.strip():
        return ""
    return json.loads(ran.stdout)["hookSpecificOutput"]["additionalContext"]


async def episodes_of(harness, agent_session: str, project: str = "webshop") -> list:
    """The episodes the hook recorded in the agent's session of ``project``."""
    external = session_external_id(project, agent_session)
    session = await harness.memory.GetSession(pb.GetSessionRequest(external_id=external))
    page = await harness.memory.ListEpisodes(
        pb.ListEpisodesRequest(session_id=session.id, page_size=100)
    )
    return list(page.episodes)


class Blackhole:
    """A TCP listener that accepts connections and never answers: a hung server."""

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.held: list[socket.socket] = []
        self.stop = threading.Event()

        def accept() -> None:
            self.sock.settimeout(0.1)
            while not self.stop.is_set():
                try:
                    self.held.append(self.sock.accept()[0])
                except OSError:
                    continue

        self.thread = threading.Thread(target=accept, daemon=True)
        self.thread.start()
        return f"127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        for s in self.held:
            s.close()
        self.sock.close()
