"""Run the real ``nexus-grpc serve`` as a subprocess, as an operator would."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from nexus_grpc.connection import open_channel
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as m
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as mgrpc

PORT_LINE = re.compile(r"serving on \S+ \(port (\d+)\)")


class ServerProcess:
    def __init__(self, data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra = extra
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.log: list[str] = []

    def start(self, timeout: float = 60.0, port: int = 0) -> ServerProcess:
        """Starts the server on ``port`` (0: an ephemeral one; a restart passes the old one)."""
        self.port = 0
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nexus_grpc.cli", "serve", "--listen", f"127.0.0.1:{port}",
             "--data-dir", str(self.data_dir), *self.extra],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=self.env,
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.append(line)
                found = PORT_LINE.search(line)
                if found:
                    self.port = int(found.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout) or not self.port:
            self.kill()
            raise RuntimeError("server did not start:\n" + "".join(self.log[-30:]))
        return self

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "nexus.sqlite3"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sigkill(self) -> None:
        """kill -9, without waiting: safe to call from the event loop."""
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def log_tail(self, lines: int = 30) -> str:
        return "".join(self.log[-lines:])

    async def wait_for_log(
        self,
        pattern: str,
        timeout: float = 60.0,  # noqa: ASYNC109
        interval: float = 0.05,
    ) -> re.Match[str]:
        """Poll the server's log (stderr) for a line matching ``pattern``."""
        regex = re.compile(pattern)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = 0
        while True:
            lines = self.log[seen:]  # the pump thread only appends
            seen += len(lines)
            for line in lines:
                found = regex.search(line)
                if found:
                    return found
            if loop.time() > deadline:
                raise AssertionError(f"no log line matching {pattern!r}:\n{self.log_tail()}")
            await asyncio.sleep(interval)


async def queue_depths(target: str) -> dict[str, tuple[int, int]]:
    """{job kind: (pending, failed)} from GetServiceStatus."""
    async with open_channel(target) as channel:
        status = await mgrpc.MemoryServiceStub(channel).GetServiceStatus(
            m.GetServiceStatusRequest(), timeout=10
        )
    return {q.kind: (q.pending, q.failed) for q in status.queues}


async def wait_queue_empty(
    target: str,
    kind: str,
    timeout: float,  # noqa: ASYNC109 - a drain can take minutes; callers size it
    interval: float = 0.2,
) -> tuple[int, int]:
    """Poll GetServiceStatus until ``kind`` has nothing pending (no event crosses
    the process boundary).  Returns (pending, failed) as last seen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        depth = (await queue_depths(target)).get(kind, (0, 0))
        if depth[0] == 0:
            return depth
        if loop.time() > deadline:
            raise AssertionError(f"{kind} still has {depth[0]} pending after {timeout:.0f}s")
        await asyncio.sleep(interval)


def read_only(path: Path) -> sqlite3.Connection:
    """A reader beside a live server (WAL lets it read while the server writes)."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)
