"""The agent hosts: what each calls its three events, and where it keeps its settings.

All three run a command per event with the event's JSON on stdin and read
``hookSpecificOutput.additionalContext`` from its stdout (Claude Code's hook
protocol, which Codex CLI follows and Gemini CLI follows under its own event
names). Where they differ is here, and in ``transcripts.py``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

__all__ = ["HOSTS", "Event", "Host", "host_named"]


class Event(Enum):
    """What a hook is asked to do, whatever the host calls the event."""

    #: A session starts (or resumes, or is cleared): the most important memories.
    START = "start"
    #: A prompt was submitted: memories and past exchanges that match it.
    PROMPT = "prompt"
    #: The agent answered: the exchange becomes an episode.
    STOP = "stop"


@dataclass(frozen=True)
class Host:
    name: str
    title: str
    #: The host's name for each event (the settings' keys and ``hook_event_name``).
    events: dict[Event, str]
    #: A hook's ``timeout`` in the host's unit: seconds, or milliseconds (Gemini).
    timeout_per_second: int
    #: The settings file a project-scope install writes, relative to the project root.
    project_file: str

    def event_named(self, hook_event_name: str) -> Event | None:
        for event, name in self.events.items():
            if name == hook_event_name:
                return event
        return None

    def user_file(self, environ: dict[str, str] | None = None) -> Path:
        """The user-scope settings file, where the host itself looks for it."""
        env = os.environ if environ is None else environ
        home = Path(env.get("HOME") or Path.home())
        if self.name == "claude-code":
            return Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude") / "settings.json"
        if self.name == "codex":
            return codex_home(env) / "hooks.json"
        return Path(env.get("GEMINI_CLI_HOME") or home) / ".gemini" / "settings.json"


def codex_home(environ: dict[str, str] | os._Environ[str]) -> Path:
    """``$CODEX_HOME``, else ``~/.codex``: Codex's user config, hooks and trust."""
    home = Path(environ.get("HOME") or Path.home())
    return Path(environ.get("CODEX_HOME") or home / ".codex")


HOSTS: dict[str, Host] = {
    "claude-code": Host(
        name="claude-code",
        title="Claude Code",
        events={
            Event.START: "SessionStart",
            Event.PROMPT: "UserPromptSubmit",
            Event.STOP: "Stop",
        },
        timeout_per_second=1,
        project_file=".claude/settings.json",
    ),
    "codex": Host(
        name="codex",
        title="Codex CLI",
        events={
            Event.START: "SessionStart",
            Event.PROMPT: "UserPromptSubmit",
            Event.STOP: "Stop",
        },
        timeout_per_second=1,
        project_file=".codex/hooks.json",
    ),
    "gemini": Host(
        name="gemini",
        title="Gemini CLI",
        events={
            Event.START: "SessionStart",
            Event.PROMPT: "BeforeAgent",
            Event.STOP: "AfterAgent",
        },
        timeout_per_second=1000,
        project_file=".gemini/settings.json",
    ),
}


def host_named(name: str) -> Host:
    return HOSTS[name]
