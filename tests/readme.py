"""The README's code blocks, as the tests that run them as written read them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def blocks(heading: str, lang: str) -> list[str]:
    """The ``lang`` code blocks of the README section under ``heading`` (a whole
    heading line, e.g. ``## Quick start``), up to the next heading of its level
    or above, in order. Lines starting with ``#`` inside a block are code."""
    level = len(heading.split(" ", 1)[0])
    found: list[str] = []
    inside = False
    fence: str | None = None
    body: list[str] = []
    for line in README.read_text().splitlines():
        if fence is None and line.startswith("#"):
            hashes = len(line) - len(line.lstrip("#"))
            if line == heading:
                inside = True
                continue
            if inside and hashes <= level:
                break
        if not inside:
            continue
        if fence is None and line.startswith("```"):
            fence = line[3:].strip()
            body = []
        elif fence is not None and line.startswith("```"):
            if fence == lang:
                found.append("\n".join(body) + "\n")
            fence = None
        elif fence is not None:
            body.append(line)
    return found
