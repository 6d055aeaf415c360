"""What an install created in a settings file, kept for the uninstall.

Taking our hooks out of a settings file leaves an event list or a ``hooks``
object empty where the install had made it, or where the user had it empty
before: the text alone cannot tell which. The install notes what it created
(the file, the ``hooks`` object, an event's list) in a small file of the
user's own state, keyed by the settings file's path, and the uninstall
removes exactly those. Without a receipt (hooks installed by hand, or state
wiped) what our removal empties goes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["drop", "load", "save"]


def _path(settings: Path, environ: Mapping[str, str]) -> Path:
    home = Path(environ.get("HOME") or Path.home())
    base = Path(environ.get("XDG_STATE_HOME") or home / ".local" / "state")
    digest = hashlib.sha256(str(settings.resolve()).encode()).hexdigest()[:32]
    return base / "nexus-grpc" / "agent-hooks" / f"{digest}.json"


def save(settings: Path, created: set[str], environ: Mapping[str, str]) -> None:
    path = _path(settings, environ)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"settings": str(settings.resolve()), "created": sorted(created)}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def load(settings: Path, environ: Mapping[str, str]) -> set[str] | None:
    try:
        record = json.loads(_path(settings, environ).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    created = record.get("created") if isinstance(record, dict) else None
    return {c for c in created if isinstance(c, str)} if isinstance(created, list) else None


def drop(settings: Path, environ: Mapping[str, str]) -> None:
    _path(settings, environ).unlink(missing_ok=True)
