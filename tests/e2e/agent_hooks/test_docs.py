"""What README.md says about the hooks is what the commands do: its walk-through run
as written. (docs/agents.md's flag table against ``hooks install``'s parser:
tests/unit/test_hooks_settings_text.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests import readme
from tests.e2e.agent_hooks.conftest import base_env


def test_the_readme_walk_through_runs_as_written(tmp_path: Path, home: Path, project: Path):
    [script] = readme.blocks("## Coding agents through hooks", "sh")
    key = home / ".config" / "nexus" / "key"
    key.parent.mkdir(parents=True)
    key.write_text("nexus-key-0000000001\n")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=project, env=base_env(home), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (project / ".claude").exists()  # installed, then uninstalled
    assert "hooks run codex" in (project / ".codex" / "hooks.json").read_text()
    assert "trusted_hash" in (home / ".codex" / "config.toml").read_text()
    assert "hooks run gemini" in (home / ".gemini" / "settings.json").read_text()
