"""The README's settings table names every flag, env var and default the server takes.

Clients and deployment scripts copy these names from the README, so a setting
added or renamed in config.py without its row would mislead them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nexus_grpc.runtime.config import OPTIONS, env_default, help_text, markdown_table, settings_from

README = Path(__file__).resolve().parents[3] / "README.md"


def rows() -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `--"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            table[cells[0].strip("`")] = cells
    return table


def test_every_option_has_its_row_with_env_and_default() -> None:
    table = rows()
    for option in OPTIONS.values():
        assert option.flag in table, f"README lacks a row for {option.flag}"
        flag, envs, default, _ = table[option.flag]
        assert envs == " / ".join(f"`{e}`" for e in option.env), option.flag
        assert default == (f"`{option.default}`" if option.default else "(empty)"), option.flag
    assert set(table) == {o.flag for o in OPTIONS.values()}, "README lists a flag that is gone"


def test_the_readme_table_is_the_generated_one() -> None:
    """The table is written by ``python -m nexus_grpc.runtime.config README.md`` from
    the declarations in Settings; a hand edit or a new option without a
    rerun shows up here."""
    text = README.read_text(encoding="utf-8")
    assert markdown_table() in text, "run: python -m nexus_grpc.runtime.config README.md"


def test_serve_help_comes_from_the_same_declarations() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nexus_grpc.cli", "serve", "--help"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "400"},
    )
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    for option in OPTIONS.values():
        assert option.flag in out
        assert " ".join(help_text(option).split()) in out, option.flag
    assert "one of text, json" in out


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--log-format", "xml", "--log-format: 'xml' is not one of text, json"),
        ("--sqlite-synchronous", "sometimes", "--sqlite-synchronous: 'sometimes' is not one of"),
        ("--embedder", "word2vec", "--embedder: 'word2vec' is not one of minilm, e5, ollama"),
        ("--llm-timeout", "soon", "--llm-timeout: cannot read 'soon' as float"),
    ],
)
def test_a_bad_value_stops_the_start_naming_its_flag(tmp_path, flag, value, expected) -> None:
    data = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-m", "nexus_grpc.cli", "serve", "--data-dir", str(data),
         "--listen", "127.0.0.1:0", flag, value],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode != 0
    assert expected in proc.stderr, proc.stderr[-2000:]
    assert not data.exists(), "a refused start must not create its data directory"


def test_choices_take_any_case_and_are_stored_as_declared(monkeypatch) -> None:
    settings = settings_from({"log_format": "JSON", "sqlite_synchronous": "normal"})
    assert (settings.log_format, settings.sqlite_synchronous) == ("json", "NORMAL")
    # The environment goes through the same check as the flag.
    monkeypatch.setenv("NEXUS_LOG_LEVEL", "warning")
    assert settings_from({"log_level": env_default("log_level")}).log_level == "WARNING"
    monkeypatch.setenv("NEXUS_LOG_LEVEL", "loud")
    with pytest.raises(SystemExit, match="--log-level: 'loud' is not one of"):
        settings_from({"log_level": env_default("log_level")})
