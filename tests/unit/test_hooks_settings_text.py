"""``hooks install``'s edits as text (agent_hooks/settings_file.py, codex_trust.py and
the command line install.py writes): our groups appended after the user's, taken out
again byte for byte, what is ours, the files refused, Codex's trust block, and the
command the host runs parsed back by ``hooks run``'s parser.

No file is read or written here: each test hands the functions the text a settings
file holds, as ``install`` and ``uninstall`` do. (Those two on real files in a home and
a work tree, the key file, the receipts: test_hooks_install_files.py; the CLIs reading
what was written: tests/e2e/agent_hooks/test_claude_code.py, test_codex.py,
test_gemini.py.)"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from nexus_grpc.agent_hooks import codex_trust, json_text, settings_file
from nexus_grpc.agent_hooks.install import Plan, _key_file, command_line
from nexus_grpc.agent_hooks.options import add_install, run_parser
from nexus_grpc.agent_hooks.settings_file import is_ours
from tests import readme
from tests.unit.hooks_settings_shapes import (
    CLAUDE_EVENTS,
    CLAUDE_SHAPES,
    CODEX_CONFIGS,
    GEMINI_EVENTS,
    GEMINI_WITH_COMMENTS,
    assert_ours_after_theirs,
    ours,
)


def command(host: str, target: str) -> str:
    return f"nexus-grpc hooks run {host} --target {target}"


def added(text: str, host: str, events: tuple[str, ...], target: str) -> tuple[str, set[str]]:
    """``text`` with our group on each event, and what the install created (its receipt)."""
    created = settings_file.created_by_adding(text, events)
    group = settings_file.group(command(host, target), 5)
    return settings_file.add(text, dict.fromkeys(events, group)), created


@pytest.mark.parametrize("shape", CLAUDE_SHAPES)
def test_claude_settings_come_back_byte_for_byte(shape):
    original = CLAUDE_SHAPES[shape]
    before = json_text.parse(original).data()
    text, created = added(original, "claude-code", CLAUDE_EVENTS, "10.0.0.5:50051")
    after = json.loads(text)
    assert_ours_after_theirs(before, after, CLAUDE_EVENTS, command("claude-code", "10.0.0.5:50051"))

    # Installing again replaces ours: the old taken out with the receipt, the new added.
    mine = is_ours("claude-code")
    again = settings_file.add(
        settings_file.remove(text, mine, created),
        dict.fromkeys(CLAUDE_EVENTS, settings_file.group(command("claude-code", "10.0.0.6:1"), 5)),
    )
    assert ours(json.loads(again), "Stop") == [command("claude-code", "10.0.0.6:1")]

    assert settings_file.remove(again, mine, created) == original


def test_no_settings_before_leave_an_empty_object_the_receipt_says_was_ours():
    text, created = added("", "claude-code", CLAUDE_EVENTS, "h:1")
    assert "file" in created and set(json.loads(text)["hooks"]) == set(CLAUDE_EVENTS)
    # uninstall deletes a file that is then "{}" and that the install created.
    assert settings_file.remove(text, is_ours("claude-code"), created).strip() == "{}"


def test_uninstall_takes_out_ours_and_leaves_what_the_user_added_since():
    text, created = added("", "claude-code", CLAUDE_EVENTS, "h:1")
    data = json.loads(text)
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "say done"}]})
    data["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "notify-send hi"})
    data["theme"] = "dark"
    removed = settings_file.remove(json.dumps(data, indent=2), is_ours("claude-code"), created)
    assert json.loads(removed) == {
        "hooks": {
            "Stop": [
                {"hooks": [{"type": "command", "command": "notify-send hi"}]},
                {"hooks": [{"type": "command", "command": "say done"}]},
            ]
        },
        "theme": "dark",
    }


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"hooks": [oops}', None),
        ("[1, 2]", "not a JSON object"),
        ('{"hooks": []}', '"hooks" is not an object'),
        ('{"hooks": {"Stop": {}}}', '"hooks"."Stop" is not a list'),
    ],
)
def test_settings_that_cannot_be_edited_are_refused(text, why):
    with pytest.raises(json_text.NotJSON, match=why):
        added(text, "claude-code", CLAUDE_EVENTS, "h:1")


def test_gemini_settings_with_comments_come_back_byte_for_byte():
    text, created = added(GEMINI_WITH_COMMENTS, "gemini", GEMINI_EVENTS, "h:1")
    data = json_text.parse(text).data()
    assert data["general"] == {"vimMode": True}
    assert len(data["hooks"]["BeforeAgent"]) == 2
    assert settings_file.remove(text, is_ours("gemini"), created) == GEMINI_WITH_COMMENTS


def test_only_our_commands_count_as_ours():
    mine = is_ours("codex")
    for line, expected in (
        ("nexus-grpc hooks run codex --target x:1", True),
        ("/home/dana/.venv/bin/nexus-grpc hooks run codex", True),
        ("'/opt/my tools/nexus-grpc' hooks run codex", True),
        ("/usr/bin/python3 -m nexus_grpc.cli hooks run codex", True),
        ("nexus-grpc hooks run codexx", False),
        ("nexus-grpc hooks run claude-code", False),
        ("my-nexus-grpc hooks run codex", False),
        ("echo nexus-grpc", False),
    ):
        assert mine({"type": "command", "command": line}) is expected, line
    assert not mine({"type": "prompt", "prompt": "nexus-grpc hooks run codex"})


# --- Codex's trust ----------------------------------------------------------------------

HOOKS_FILE = Path("/home/dev/.codex/hooks.json")


def codex_trust_for(hooks_text: str) -> list[codex_trust.TrustEntry]:
    groups = settings_file.positions(hooks_text, CLAUDE_EVENTS, is_ours("codex"))
    return codex_trust.entries(HOOKS_FILE, groups, command("codex", "h:1"), 5)


@pytest.mark.parametrize("config_shape", CODEX_CONFIGS)
def test_codex_trust_goes_into_config_toml_and_comes_out_exactly(config_shape):
    original = CODEX_CONFIGS[config_shape]
    hooks_text, _ = added("", "codex", CLAUDE_EVENTS, "h:1")
    trust = codex_trust_for(hooks_text)
    config, skipped = codex_trust.add_block(original or "", trust, created=original is None)
    assert skipped == []
    state = tomllib.loads(config)["hooks"]["state"]
    for label in ("session_start", "user_prompt_submit", "stop"):
        assert state[f"{HOOKS_FILE}:{label}:0:0"]["trusted_hash"].startswith("sha256:")
    again, _ = codex_trust.add_block(config, trust, created=False)  # again: one block, not two
    assert again.count(">>> nexus-grpc") == 1
    # What uninstall writes back, and whether the install had created the file.
    assert codex_trust.remove_block(again) == (original or "", original is None)


def test_a_hook_the_user_trusted_already_is_left_to_their_entry():
    hooks_text, _ = added("", "codex", CLAUDE_EVENTS, "h:1")
    trust = codex_trust_for(hooks_text)
    stop = next(e for e in trust if e.key.endswith(":stop:0:0"))
    theirs = f'[hooks.state."{stop.key}"]\ntrusted_hash = "sha256:00"\n'
    config, skipped = codex_trust.add_block(theirs, trust, created=False)
    assert skipped == [stop.key]
    assert tomllib.loads(config)["hooks"]["state"][stop.key]["trusted_hash"] == "sha256:00"


def test_codex_config_that_cannot_take_the_trust_is_refused():
    hooks_text, _ = added("", "codex", CLAUDE_EVENTS, "h:1")
    with pytest.raises(tomllib.TOMLDecodeError):
        codex_trust.add_block("hooks = { state = {} }\n", codex_trust_for(hooks_text),
                              created=False)  # fmt: skip


# --- the command the host runs ------------------------------------------------------------


def test_the_key_never_goes_into_the_command_only_the_file_it_is_written_to():
    plan = Plan(host="claude-code", api_key="sk-nexus-secret-0001", target="h:1")
    key_file = _key_file(plan, {"HOME": "/home/dev", "XDG_CONFIG_HOME": "/home/dev/.config"})
    assert key_file == "/home/dev/.config/nexus-grpc/agent-hooks/h_1.key"
    line = command_line(plan, key_file, "nexus-grpc")
    assert "sk-nexus-secret-0001" not in line
    # What the host runs is what `hooks run` takes.
    args = run_parser().parse_args(shlex.split(line)[3:])
    assert (args.host, args.target, args.api_key_file) == ("claude-code", "h:1", key_file)


def test_every_flag_reaches_the_command():
    plan = Plan(
        host="gemini", target="mem.lan:443", cacert="/etc/nexus/ca.pem", project="shop api",
        user="dana", deadline=0.8, session_tokens=300, prompt_tokens=200,
    )  # fmt: skip
    line = command_line(plan, "", "nexus-grpc")
    args = run_parser().parse_args(shlex.split(line)[3:])
    assert (args.target, args.cacert, args.project, args.user) == (
        "mem.lan:443",
        "/etc/nexus/ca.pem",
        "shop api",
        "dana",
    )
    assert (args.deadline, args.session_tokens, args.prompt_tokens) == (0.8, 300, 200)
    # The defaults are left to `hooks run`'s own.
    assert command_line(Plan(host="codex"), "", "nexus-grpc") == (
        "nexus-grpc hooks run codex --target 127.0.0.1:50051"
    )


def test_the_flag_table_is_the_install_commands_flags():
    """docs/agents.md's table of ``hooks install``'s flags names every flag it has."""
    parser = argparse.ArgumentParser()
    add_install(parser)
    flags = {o for action in parser._actions for o in action.option_strings if o.startswith("--")}
    flags.discard("--help")
    doc = (readme.ROOT / "docs" / "agents.md").read_text()
    table = doc.split("| flag | default | what |", 1)[1].split("\n\n", 1)[0]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    documented = {flag for cell in first_cells for flag in re.findall(r"--[a-z-]+", cell)}
    assert documented == flags
