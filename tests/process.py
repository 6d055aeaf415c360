"""Run the real ``nexus-grpc serve`` as a subprocess, as an operator would."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

PORT_LINE = re.compile(r"serving on \S+ \(port (\d+)\)")


class ServerProcess:
    def __init__(self, data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra = extra
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.log: list[str] = []

    def start(self, timeout: float = 60.0) -> ServerProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nexus_grpc.cli", "serve", "--listen", "127.0.0.1:0",
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

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)
