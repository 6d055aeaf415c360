"""What README.md and docs/agents.md say about the hooks is what the commands do."""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

from nexus_grpc.agent_hooks.options import add_install
from tests import readme
from tests.e2e.agent_hooks.conftest import base_env

DOC = readme.ROOT / "docs" / "agents.md"


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


def test_the_flag_table_is_the_install_commands_flags():
    parser = argparse.ArgumentParser()
    add_install(parser)
    flags = {o for action in parser._actions for o in action.option_strings if o.startswith("--")}
    flags.discard("--help")
    table = DOC.read_text().split("| flag | default | what |", 1)[1].split("\n\n", 1)[0]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    documented = {flag for cell in first_cells for flag in re.findall(r"--[a-z-]+", cell)}
    assert documented == flags
