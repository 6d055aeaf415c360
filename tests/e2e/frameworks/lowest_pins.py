"""The lowest version of each framework adapter's range in pyproject.toml, as pins.

``make test-integrations-lowest`` installs them into a second virtualenv and runs
tests/e2e/frameworks there, so both ends of every declared range are tested (the dev
install takes the highest)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXTRAS = ("langgraph", "langchain", "llamaindex")


def lowest_pins() -> list[str]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    pins = []
    for extra in EXTRAS:
        for requirement in extras[extra]:
            name, lowest = re.fullmatch(r"([\w.-]+)>=([\w.]+),<[\w.]+", requirement).groups()
            pins.append(f"{name}=={lowest}")
    return pins


if __name__ == "__main__":
    print(" ".join(lowest_pins()))
