"""The users' own settings files that ``hooks install`` must give back byte
for byte, in each shape a file may take (Claude Code's settings.json,
Gemini's with comments, Codex's config.toml), the events each host gets our
hook on, ``ours``, our commands among an event's groups, and
``assert_ours_after_theirs``, what an install must leave of the user's
settings around our groups. Not a test
module: the edits as text (tests/unit/test_hooks_settings_text.py, every
shape) and the edits on real files (test_hooks_install_files.py, one shape
per branch of ``uninstall``) are tested on the same files."""

from __future__ import annotations

CLAUDE_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop")
GEMINI_EVENTS = ("SessionStart", "BeforeAgent", "AfterAgent")

CLAUDE_SHAPES = {
    "four spaces, their own hooks, no final newline": """{
    "model": "opus",
    "hooks": {
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "~/bin/prompt-guard"}]}
        ],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/bash-guard"}]}
        ]
    }
}""",
    "one line": (
        '{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"}]}]}}\n'
    ),
    "tabs": '{\n\t"env": {\n\t\t"FOO": "1"\n\t}\n}\n',
    "empty object": "{}",
    "empty hooks and an empty event list": '{\n  "hooks": {"Stop": []}\n}\n',
    "unicode": '{\n  "statusLine": "\u2713 caf\u00e9",\n  "hooks": {}\n}\n',
}

GEMINI_WITH_COMMENTS = """{
  // the user's notes
  "general": {"vimMode": true}, /* and more */
  "hooks": {
    "BeforeAgent": [
      // theirs
      {"hooks": [{"type": "command", "command": "./lint-prompt"}]}
    ]
  }
}
"""

CODEX_CONFIGS = {
    "none": None,
    "empty": "",
    "no final newline": 'model = "o3"\n[profiles.fast]\nmodel = "gpt-5-mini"',
    "a hook trusted in /hooks": (
        'model = "o3"\n\n[hooks.state."/somewhere/hooks.json:stop:0:0"]\n'
        'trusted_hash = "sha256:00"\n'
    ),
}


def ours(data: dict, event: str) -> list[str]:
    return [
        h["command"]
        for g in data["hooks"][event]
        for h in g["hooks"]
        if "hooks run" in h["command"]
    ]


def assert_ours_after_theirs(before: dict, after: dict, events, command: str) -> None:
    """``after`` (settings read back after an install) holds ``command`` once
    on each of ``events``, after the user's own groups; every other key and
    every group of ``before`` is kept as it was."""
    for event in events:
        assert ours(after, event) == [command]
        their_groups = before.get("hooks", {}).get(event, [])
        assert after["hooks"][event][: len(their_groups)] == their_groups  # theirs first
    assert {k: v for k, v in after.items() if k != "hooks"} == {
        k: v for k, v in before.items() if k != "hooks"
    }
    for event, groups in before.get("hooks", {}).items():
        assert after["hooks"][event][: len(groups)] == groups
