"""Project ids the hooks found by name, remembered between runs.

Every hook run is a new process, and finding a project by name in the key's
own tenant takes a listing and, when the name exists, the service status
(``client/name_lookup.py`` explains why): work every prompt would repeat.
The id is kept in a small file per user, keyed by the server, a fingerprint
of the key (never the key) and the name; a call that finds the project gone
forgets it, and the next run looks it up again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

__all__ = ["ProjectCache", "default_path"]


def default_path(environ: dict[str, str] | os._Environ[str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "nexus-grpc" / "agent-hooks-projects.json"


class ProjectCache:
    def __init__(self, path: Path, *, target: str, api_key: str) -> None:
        self.path = path
        fingerprint = hashlib.sha256(api_key.encode()).hexdigest()[:16] if api_key else "-"
        self._prefix = f"{target}|{fingerprint}|"

    def _read(self) -> dict[str, int]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, int) and v > 0}

    def get(self, project: str) -> int | None:
        return self._read().get(self._prefix + project)

    def put(self, project: str, project_id: int) -> None:
        data = self._read()
        data[self._prefix + project] = project_id
        self._write(data)

    def forget(self, project: str) -> None:
        data = self._read()
        if data.pop(self._prefix + project, None) is not None:
            self._write(data)

    def _write(self, data: dict[str, int]) -> None:
        """Atomically (another hook may be reading), readable by the user alone.
        A cache that cannot be written only costs the next run a lookup."""
        import tempfile  # only on a miss: it imports shutil and the compressors

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".projects-")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)
