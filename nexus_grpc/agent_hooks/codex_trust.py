"""Codex CLI runs a hook only once its definition is trusted.

Codex keeps, in the user's ``config.toml``, a ``trusted_hash`` per hook under
``[hooks.state."<hooks file>:<event>:<group>:<handler>"]``, and runs an
unmanaged hook only when that hash is the hook's current one (its ``/hooks``
view is where a person trusts them; ``codex exec`` has
``--dangerously-bypass-hook-trust`` for automation). ``hooks install codex``
is the person trusting these three hooks, so it writes their hashes, computed
as Codex computes them (``codex-rs/hooks/src/engine/discovery.rs``,
``command_hook_hash``: the SHA-256 of the canonical JSON of the event's
snake_case name and the matcher group holding only the normalized handler,
with absent options left out). The test with the pinned Codex proves the
hooks run without the bypass; a Codex that hashes differently shows them as
changed in ``/hooks``, to be trusted there.

The entries go in one block at the end of ``config.toml`` between marker
comments, and ``uninstall`` removes exactly that block.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TrustEntry", "add_block", "command_hash", "entries", "remove_block"]

BEGIN = "# >>> nexus-grpc hooks install codex: trust for its hooks"
END = "# <<< nexus-grpc hooks install codex"
_CREATED = " (it created this file)"
_JOINED = " (the file did not end in a newline)"
_BLOCK = re.compile(
    "^" + re.escape(BEGIN) + r"[^\n]*\n.*?^" + re.escape(END) + r"[^\n]*(?:\n|\Z)",
    re.DOTALL | re.MULTILINE,
)
_LABELS = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "Stop": "stop",
}


@dataclass(frozen=True)
class TrustEntry:
    key: str
    trusted_hash: str


def command_hash(event: str, command: str, timeout: int) -> str:
    identity = {
        "event_name": _LABELS[event],
        "hooks": [{"type": "command", "command": command, "timeout": timeout, "async": False}],
    }
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def entries(
    hooks_file: Path, groups: dict[str, int], command: str, timeout: int
) -> list[TrustEntry]:
    """Trust for our handler (handler 0 of group ``groups[event]``) of each event,
    under the file's path as given and as resolved, should Codex see it so."""
    paths = {str(Path(os.path.abspath(hooks_file))), str(hooks_file.resolve())}
    return [
        TrustEntry(f"{path}:{_LABELS[event]}:{index}:0", command_hash(event, command, timeout))
        for path in sorted(paths)
        for event, index in groups.items()
    ]


def _quoted(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)


def remove_block(text: str) -> tuple[str, bool]:
    """``text`` without our block; and whether the block had created the file."""
    found = _BLOCK.search(text)
    if found is None:
        return text, False
    first = found.group(0).split("\n", 1)[0]
    rest = text[: found.start()] + text[found.end() :]
    if first.endswith(_JOINED) and rest.endswith("\n"):
        rest = rest[:-1]
    return rest, first.endswith(_CREATED)


def existing_keys(text: str) -> set[str]:
    """The hook state keys ``text`` already holds (a person trusted them in Codex)."""
    state = tomllib.loads(text).get("hooks", {}).get("state", {}) if text.strip() else {}
    return set(state) if isinstance(state, dict) else set()


def add_block(text: str, trust: Iterable[TrustEntry], *, created: bool) -> tuple[str, list[str]]:
    """``text`` with our block at its end (after taking out any earlier one), and the
    keys left out because the file already trusts them in a table of its own.
    Raises ``tomllib.TOMLDecodeError`` when the result would not be valid TOML."""
    text, created_before = remove_block(text)
    created = created or (created_before and not text)
    held = existing_keys(text)
    skipped = [e.key for e in trust if e.key in held]
    lines = [BEGIN + " (`nexus-grpc hooks uninstall codex` removes this block)"]
    if created:
        lines[0] += _CREATED
    joined = bool(text) and not text.endswith("\n")
    if joined:
        lines[0] += _JOINED
    for e in trust:
        if e.key in held:
            continue
        lines += [f"[hooks.state.{_quoted(e.key)}]", f"trusted_hash = {_quoted(e.trusted_hash)}"]
    lines.append(END)
    out = text + ("\n" if joined else "") + "\n".join(lines) + "\n"
    tomllib.loads(out)
    return out, skipped
