"""The one server launcher: the real ``nexus-grpc serve`` as a subprocess, as an operator runs it.

``make bench``, bench/profile_search.py and the process-based tests (kill -9,
shutdown, restarts) all start their servers here, so each of them meets the
same start-up: an ephemeral port on 127.0.0.1, read from the server's
``serving on ... (port N)`` log line, then a grpc.health.v1 Check that answers
SERVING before ``start()`` returns.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.client.connection import open_channel
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc

__all__ = [
    "PORT_LINE",
    "RECONCILE_LINE",
    "ServerProcess",
    "StartError",
    "queue_depths",
    "wait_queue_empty",
]

#: server.py logs it once the port is bound and health says SERVING.
PORT_LINE = re.compile(r"serving on \S+ \(port (\d+)\)")
#: The lines a ``keep_log=False`` server keeps (for errors' log tails).
_TAIL = 200
#: app.py logs it when the start-up reconcile has compared SQLite with the index.
RECONCILE_LINE = re.compile(r"start-up reconcile: (\d+) requeued")


class StartError(RuntimeError):
    """The server exited, or did not answer health, before the start-up timeout."""


class ServerProcess:
    """One ``nexus-grpc serve`` process over ``data_dir``; ``extra`` are more flags
    (plaintext only: the readiness check does not speak TLS)."""

    def __init__(
        self,
        data_dir: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        keep_log: bool = True,
    ) -> None:
        self.data_dir = data_dir
        self.extra = extra
        # The port line is logged at INFO: a level set in the caller's environment
        # must not hide it (``env`` can still say otherwise).
        self.env = {**os.environ, "NEXUS_LOG_LEVEL": "INFO", **(env or {})}
        self.cwd = cwd
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        #: Seconds from the process's start to its port line (the last start).
        self.startup_s = 0.0
        #: Every stderr line so far, appended by the reader thread.  With
        #: ``keep_log=False`` only the latest ones: a benchmark's access log runs to
        #: millions of lines, which the load client would otherwise hold in memory
        #: (``wait_for_log`` then cannot be used).
        self.log: list[str] = []
        self.keep_log = keep_log
        self.reconciled = threading.Event()
        self.requeued = -1
        self._reader: threading.Thread | None = None

    def start(self, timeout: float = 60.0, port: int = 0) -> ServerProcess:
        """Starts the server on ``port`` (0: an ephemeral one; a restart passes the
        old one) and returns once grpc.health.v1 Check answers SERVING."""
        self.port = 0
        self.reconciled.clear()
        self.requeued = -1
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nexus_grpc.cli", "serve", "--listen", f"127.0.0.1:{port}",
             "--data-dir", str(self.data_dir), *self.extra],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=self.env,
            cwd=self.cwd,
        )  # fmt: skip
        listening = threading.Event()

        def pump(proc: subprocess.Popen[str]) -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                self.log.append(line)
                if not self.keep_log and len(self.log) > 2 * _TAIL:
                    del self.log[:-_TAIL]
                found = PORT_LINE.search(line)
                if found:
                    self.port = int(found.group(1))
                    self.startup_s = time.perf_counter() - started
                    listening.set()
                found = RECONCILE_LINE.search(line)
                if found:
                    self.requeued = int(found.group(1))
                    self.reconciled.set()
            listening.set()  # it exited: start() stops waiting

        self._reader = threading.Thread(target=pump, args=(self.proc,), daemon=True)
        self._reader.start()
        if not listening.wait(timeout) or not self.port:
            self.kill()
            raise StartError("server did not start:\n" + self.log_tail())
        left = max(1.0, timeout - (time.perf_counter() - started))
        if not self._serving(left):
            self.kill()
            raise StartError(
                "server logged its port but health never said SERVING:\n" + self.log_tail()
            )
        return self

    def _serving(self, timeout: float) -> bool:
        """grpc.health.v1 Check on the whole server until SERVING or ``timeout``."""
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.target) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while self.running():
                try:
                    answer = health.Check(
                        health_pb2.HealthCheckRequest(),
                        timeout=max(0.1, deadline - time.monotonic()),
                        wait_for_ready=True,
                    )
                    if answer.status == health_pb2.HealthCheckResponse.SERVING:
                        return True
                except grpc.RpcError:
                    pass
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.05)  # NOT_SERVING a moment: the server says when, not an event
        return False

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "nexus.sqlite3"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_settled(self, timeout: float = 600.0) -> None:
        """Returns once the start-up reconcile has run and found the index complete.

        A benchmark measures nothing before: background re-embedding would weigh on
        every figure, and a seeded index that misses rows is a broken seed.
        """
        if not self.reconciled.wait(timeout):
            raise StartError(f"the start-up reconcile did not finish in {timeout:.0f} s")
        if self.requeued:
            raise StartError(f"the index was incomplete: {self.requeued} rows requeued")

    def rss_mb(self) -> dict[str, float]:
        """Resident memory in MB: anonymous (heap, arenas) and file-backed (mmapped
        files, which the kernel can drop under pressure); VmRSS is their sum."""
        out = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(value.split()[0]) / 1024
        return out

    def cpu_seconds(self) -> float:
        """User and system CPU the server process has used, all threads."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def sigkill(self) -> None:
        """kill -9, without waiting: safe to call from the event loop."""
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)

    def kill(self) -> None:
        """kill -9 and reap."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
            self._drain()

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM (the clean shutdown) and its exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self._drain()
        return code

    def _drain(self) -> None:
        """Once the process has exited: its last lines are in ``log``."""
        if self._reader is not None:
            self._reader.join(10)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM if it still runs, and wait for it to exit."""
        if self.running():
            self.terminate(timeout)

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


async def queue_depths(
    target: str | grpc.aio.Channel,
    timeout: float = 10.0,  # noqa: ASYNC109 - an RPC deadline
) -> dict[str, tuple[int, int]]:
    """{job kind: (pending, failed)} from GetServiceStatus."""
    if isinstance(target, str):
        async with open_channel(target) as channel:
            return await queue_depths(channel, timeout)
    status = await memory_grpc.MemoryServiceStub(target).GetServiceStatus(
        memory_pb2.GetServiceStatusRequest(), timeout=timeout
    )
    return {q.kind: (q.pending, q.failed) for q in status.queues}


async def wait_queue_empty(
    target: str | grpc.aio.Channel,
    kind: str,
    timeout: float,  # noqa: ASYNC109 - a drain can take minutes; callers size it
    interval: float = 0.2,
) -> tuple[int, int]:
    """Poll GetServiceStatus until ``kind`` has nothing pending (the queue lives in
    another process: no event crosses the boundary).  Returns (pending, failed) as
    last seen."""
    if isinstance(target, str):
        async with open_channel(target) as channel:
            return await wait_queue_empty(channel, kind, timeout, interval)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        depth = (await queue_depths(target)).get(kind, (0, 0))
        if depth[0] == 0:
            return depth
        if loop.time() > deadline:
            raise TimeoutError(f"{kind} still has {depth[0]} pending after {timeout:.0f}s")
        await asyncio.sleep(interval)
