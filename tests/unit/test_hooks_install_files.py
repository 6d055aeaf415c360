"""``hooks install`` and ``uninstall`` on the user's own settings files: everything
that was there stays, byte for byte, and uninstall takes out exactly ours.

Writing those files is these functions' whole job, so each test gives them a work tree
and a home under tmp_path: where each file goes, the key file and its mode, the receipt
that says which file the install created, the refusals that write nothing. No host and
no server. The edits as text, for every shape of settings file and of Codex's
config.toml, what counts as ours, and the command line parsed back:
test_hooks_settings_text.py; so the tests here keep two shapes of each file (of
tests/unit/hooks_settings_shapes.py, which both files read), one per branch of
``uninstall`` (the user's content written back; an empty object, or no file,
left as it was). (The CLIs reading what was written: tests/e2e/agent_hooks/
test_claude_code.py, test_codex.py, test_gemini.py.)"""

from __future__ import annotations

import io
import json
import os
import shlex
import stat
import tomllib
from pathlib import Path

import pytest

from nexus_grpc.agent_hooks import json_text
from nexus_grpc.agent_hooks.install import InstallError, Plan, install, uninstall
from nexus_grpc.agent_hooks.options import run_parser
from tests.unit.hooks_settings_shapes import (
    CLAUDE_SHAPES,
    CODEX_CONFIGS,
    GEMINI_WITH_COMMENTS,
    assert_ours_after_theirs,
    ours,
)

# Of the shapes the text tests take, one per branch of ``uninstall``: the
# user's content written back, and an empty object (or no file) left as it was.
CLAUDE_FILE_SHAPES = ["four spaces, their own hooks, no final newline", "empty object"]
CODEX_FILE_SHAPES = ["none", "no final newline"]


def env_for(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}


def do_install(host: str, cwd: Path, home: Path, **plan) -> str:
    out = io.StringIO()
    install(Plan(host=host, **plan), cwd=cwd, environ=env_for(home), out=out,
            executable="nexus-grpc")  # fmt: skip
    return out.getvalue()


def do_uninstall(host: str, cwd: Path, home: Path, scope: str = "project") -> None:
    uninstall(host, scope, cwd=cwd, environ=env_for(home), out=io.StringIO())


# Two shapes of each file, one per branch of ``uninstall``.
@pytest.mark.parametrize(
    "shape", ["four spaces, their own hooks, no final newline", "empty object"]
)
def test_claude_settings_come_back_byte_for_byte(tmp_path, shape):
    project, home = tmp_path / "repo", tmp_path / "home"
    (project / ".git").mkdir(parents=True)
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(CLAUDE_SHAPES[shape])
    before = json_text.parse(CLAUDE_SHAPES[shape]).data()

    do_install("claude-code", project, home, target="10.0.0.5:50051")
    after = json.loads(settings.read_text())
    assert_ours_after_theirs(
        before, after, ("SessionStart", "UserPromptSubmit", "Stop"),
        "nexus-grpc hooks run claude-code --target 10.0.0.5:50051",
    )  # fmt: skip

    do_install("claude-code", project, home, target="10.0.0.6:50051")  # again: replaces
    again = json.loads(settings.read_text())
    assert ours(again, "Stop") == ["nexus-grpc hooks run claude-code --target 10.0.0.6:50051"]

    do_uninstall("claude-code", project, home)
    assert settings.read_text() == CLAUDE_SHAPES[shape]


def test_no_settings_before_means_none_after(tmp_path):
    project, home = tmp_path / "repo", tmp_path / "home"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    do_install("claude-code", project / "src", home)  # from a subfolder: the work tree's root
    assert (project / ".claude" / "settings.json").exists()
    do_uninstall("claude-code", project / "src", home)
    assert sorted(p.name for p in project.iterdir()) == [".git", "src"]


def test_uninstall_takes_out_ours_and_leaves_what_the_user_added_since(tmp_path):
    project, home = tmp_path / "repo", tmp_path / "home"
    (project / ".git").mkdir(parents=True)
    do_install("claude-code", project, home)
    settings = project / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "say done"}]})
    data["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "notify-send hi"})
    data["theme"] = "dark"
    settings.write_text(json.dumps(data, indent=2))
    do_uninstall("claude-code", project, home)
    assert json.loads(settings.read_text()) == {
        "hooks": {
            "Stop": [
                {"hooks": [{"type": "command", "command": "notify-send hi"}]},
                {"hooks": [{"type": "command", "command": "say done"}]},
            ]
        },
        "theme": "dark",
    }


def test_a_file_that_is_not_json_is_refused_and_left_alone(tmp_path):
    project, home = tmp_path / "repo", tmp_path / "home"
    (project / ".git").mkdir(parents=True)
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"hooks": [oops}')
    with pytest.raises(InstallError, match="nothing was written"):
        do_install("claude-code", project, home)
    assert settings.read_text() == '{"hooks": [oops}'


def test_the_key_never_goes_into_the_settings(tmp_path):
    project, home = tmp_path / "repo", tmp_path / "home"
    (project / ".git").mkdir(parents=True)
    do_install("claude-code", project, home, api_key="sk-nexus-secret-0001", target="h:1")
    text = (project / ".claude" / "settings.json").read_text()
    assert "sk-nexus-secret-0001" not in text
    key_file = home / ".config" / "nexus-grpc" / "agent-hooks" / "h_1.key"
    assert key_file.read_text() == "sk-nexus-secret-0001\n"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    command = json.loads(text)["hooks"]["Stop"][0]["hooks"][0]["command"]
    # What the host runs is what `hooks run` takes.
    args = run_parser().parse_args(shlex.split(command)[3:])
    assert (args.host, args.target, args.api_key_file) == ("claude-code", "h:1", str(key_file))

    inside = project / "secrets" / "nexus.key"
    inside.parent.mkdir()
    inside.write_text("sk-nexus-secret-0002\n")
    with pytest.raises(InstallError, match="inside the project"):
        do_install("claude-code", project, home, api_key_file=str(inside))


def test_every_flag_reaches_the_command(tmp_path):
    project, home = tmp_path / "repo", tmp_path / "home"
    (project / ".git").mkdir(parents=True)
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    do_install(
        "gemini", project, home, target="mem.lan:443", cacert=str(ca), project="shop api",
        user="dana", deadline=0.8, session_tokens=300, prompt_tokens=200,
    )  # fmt: skip
    data = json.loads((project / ".gemini" / "settings.json").read_text())
    assert set(data["hooks"]) == {"SessionStart", "BeforeAgent", "AfterAgent"}
    handler = data["hooks"]["BeforeAgent"][0]["hooks"][0]
    assert handler["timeout"] == 3800  # milliseconds, for Gemini: a backstop past the deadline
    args = run_parser().parse_args(shlex.split(handler["command"])[3:])
    assert (args.target, args.cacert, args.project, args.user) == (
        "mem.lan:443",
        str(ca),
        "shop api",
        "dana",
    )
    assert (args.deadline, args.session_tokens, args.prompt_tokens) == (0.8, 300, 200)


def test_gemini_settings_with_comments_come_back_byte_for_byte(tmp_path):
    home = tmp_path / "home"
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(GEMINI_WITH_COMMENTS)
    do_install("gemini", tmp_path, home, scope="user")
    data = json_text.parse(settings.read_text()).data()
    assert data["general"] == {"vimMode": True}
    assert len(data["hooks"]["BeforeAgent"]) == 2
    do_uninstall("gemini", tmp_path, home, scope="user")
    assert settings.read_text() == GEMINI_WITH_COMMENTS


@pytest.mark.parametrize("config_shape", CODEX_FILE_SHAPES)
def test_codex_trust_goes_into_config_toml_and_comes_out_exactly(tmp_path, config_shape):
    home = tmp_path / "home"
    codex = home / ".codex"
    codex.mkdir(parents=True)
    config = codex / "config.toml"
    original = CODEX_CONFIGS[config_shape]
    if original is not None:
        config.write_text(original)
    do_install("codex", tmp_path, home, scope="user")
    hooks_file = codex / "hooks.json"
    state = tomllib.loads(config.read_text())["hooks"]["state"]
    for event, label in (("SessionStart", "session_start"), ("UserPromptSubmit",
                         "user_prompt_submit"), ("Stop", "stop")):  # fmt: skip
        assert state[f"{hooks_file}:{label}:0:0"]["trusted_hash"].startswith("sha256:")
        assert event in json.loads(hooks_file.read_text())["hooks"]
    do_install("codex", tmp_path, home, scope="user")  # again: one block, not two
    assert config.read_text().count(">>> nexus-grpc") == 1
    do_uninstall("codex", tmp_path, home, scope="user")
    assert not hooks_file.exists()
    if original is None:
        assert not config.exists()
    else:
        assert config.read_text() == original


def test_codex_config_that_cannot_take_the_trust_is_refused_untouched(tmp_path):
    home = tmp_path / "home"
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("hooks = { state = {} }\n")
    with pytest.raises(InstallError, match="nothing was written"):
        do_install("codex", tmp_path, home, scope="user")
    assert config.read_text() == "hooks = { state = {} }\n"
    assert not (home / ".codex" / "hooks.json").exists()


def test_user_scope_goes_where_each_host_reads_it(tmp_path):
    home = tmp_path / "home"
    environ = {**env_for(home), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config"),
               "CODEX_HOME": str(tmp_path / "codex-home"),
               "GEMINI_CLI_HOME": str(tmp_path / "gemini-home")}  # fmt: skip
    for host, where in (
        ("claude-code", tmp_path / "claude-config" / "settings.json"),
        ("codex", tmp_path / "codex-home" / "hooks.json"),
        ("gemini", tmp_path / "gemini-home" / ".gemini" / "settings.json"),
    ):
        install(Plan(host=host, scope="user"), cwd=tmp_path, environ=environ,
                out=io.StringIO(), executable="nexus-grpc")  # fmt: skip
        assert where.exists(), host
        uninstall(host, "user", cwd=tmp_path, environ=environ, out=io.StringIO())
        assert not where.exists(), host
    assert not os.listdir(tmp_path / "codex-home")
