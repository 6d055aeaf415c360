"""``nexus-grpc serve`` run in a subprocess to a start that cannot succeed,
and what a clean exit from it is: ``serve`` runs it and times it,
``assert_clean_exit`` asserts exit code 2 within ``EXIT_WITHIN`` seconds, a
last line ``nexus-grpc: ...`` naming what failed, and no traceback. Not a test
module: the broken starts of the SQLite store
(tests/e2e/faults/test_startup_failures.py) and PostgreSQL's down at start
(tests/e2e/faults/test_postgres_faults.py) are held to the same clean exit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

EXIT_WITHIN = 30.0  # seconds; a failed start takes ~2 s here, a hang never ends


def serve(data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "nexus_grpc.cli", "serve", "--data-dir", str(data_dir),
         "--listen", "127.0.0.1:0", "--vector-prewarm-mb", "0", *extra],
        capture_output=True, text=True, timeout=EXIT_WITHIN * 2,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    return proc.returncode, proc.stderr, time.monotonic() - started


def last_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def assert_clean_exit(rc: int, stderr: str, took: float, *named: str) -> None:
    line = last_line(stderr)
    assert rc == 2, stderr[-3000:]
    assert took < EXIT_WITHIN, took
    assert line.startswith("nexus-grpc: "), stderr[-3000:]
    for what in named:
        assert what in line, (what, line)
    assert "Traceback" not in stderr, stderr[-3000:]
