"""--reranker-* settings: a value the reranker cannot run with stops the start
with a line naming its flag, and writes nothing.

Each setting's refusal and the settings read from the environment are pure
functions of config.py, tested in tests/unit/test_server_settings.py; one
refused start here is the wiring from ``serve`` to them."""

from __future__ import annotations

import subprocess
import sys


def test_a_bad_reranker_setting_stops_the_start_naming_its_flag(tmp_path):
    data = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-m", "nexus_grpc.cli", "serve", "--data-dir", str(data),
         "--listen", "127.0.0.1:0", "--reranker-url", "ftp://box/rerank"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "is not an http:// or https:// URL" in proc.stderr, proc.stderr[-2000:]
    assert not data.exists()
