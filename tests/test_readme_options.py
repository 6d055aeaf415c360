"""The README's settings table names every flag, env var and default the server takes.

Clients and deployment scripts copy these names from the README, so a setting
added or renamed in config.py without its row would mislead them."""

from __future__ import annotations

from pathlib import Path

from nexus_grpc.config import OPTIONS

README = Path(__file__).resolve().parent.parent / "README.md"


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
