"""The server's settings through the real command: ``serve --help`` comes from
the declarations the README's table is generated from, and a bad value stops
the start naming its flag, without creating the data directory.

Clients and deployment scripts copy these names from the README, so a setting
added or renamed in config.py without its row would mislead them. The table's
rows, each flag's refusal of a bad value, and choices taking any case are pure
functions of the declarations, and are tested in tests/unit/test_server_settings.py;
one refused start here is the wiring from the command line to them."""

from __future__ import annotations

import os
import subprocess
import sys

from nexus_grpc.runtime.config import OPTIONS, help_text


def test_serve_help_comes_from_the_same_declarations() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nexus_grpc.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    for option in OPTIONS.values():
        assert option.flag in out
        assert " ".join(help_text(option).split()) in out, option.flag
    assert "one of text, json" in out


def test_a_bad_value_stops_the_start_naming_its_flag(tmp_path) -> None:
    data = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-m", "nexus_grpc.cli", "serve", "--data-dir", str(data),
         "--listen", "127.0.0.1:0", "--log-format", "xml"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "--log-format: 'xml' is not one of text, json" in proc.stderr, proc.stderr[-2000:]
    assert not data.exists(), "a refused start must not create its data directory"
