"""A hook's stdin, read into what the hook needs, whichever host sent it.

Each host sends one JSON object with ``hook_event_name``, ``session_id``,
``cwd`` and ``transcript_path``; a prompt event adds ``prompt``, Codex a
``turn_id`` (the prompt's id), and a stop event the answer
(``last_assistant_message``; Gemini's ``prompt_response``, with ``prompt``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from nexus_grpc.agent_hooks.hosts import Event, Host

__all__ = ["BadInput", "HookInput", "parse", "without_hook_context"]

# Gemini CLI puts what SessionStart hooks answered in front of the user's own
# words, in non-interactive mode, and hands hooks the prompt with it.
_HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>\s*", re.DOTALL)


class BadInput(ValueError):
    """The host sent something this hook cannot act on."""


@dataclass(frozen=True)
class HookInput:
    event: Event
    #: The host's name for it (what the hook's answer names).
    event_name: str
    session_id: str
    cwd: str
    transcript_path: str = ""
    prompt: str = ""
    #: The prompt's id where the payload has one (Codex's ``turn_id``).
    prompt_id: str = ""
    response: str = ""


def without_hook_context(prompt: str) -> str:
    """The user's words, without the context hooks added in front of them."""
    return _HOOK_CONTEXT.sub("", prompt).strip()


def _text(payload: dict[str, object], key: str) -> str:
    value = payload.get(key)
    return value if isinstance(value, str) else ""


def parse(host: Host, raw: bytes) -> HookInput:
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise BadInput(f"the hook's input is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise BadInput("the hook's input is not a JSON object")
    name = _text(payload, "hook_event_name")
    event = host.event_named(name)
    if event is None:
        known = ", ".join(host.events.values())
        raise BadInput(f"{host.title} event {name!r} is not one of ours ({known})")
    session_id = _text(payload, "session_id").strip()
    if not session_id:
        raise BadInput(f"{name} came without a session_id")
    response = _text(payload, "last_assistant_message") or _text(payload, "prompt_response")
    return HookInput(
        event=event,
        event_name=name,
        session_id=session_id,
        cwd=_text(payload, "cwd"),
        transcript_path=_text(payload, "transcript_path"),
        prompt=without_hook_context(_text(payload, "prompt")),
        prompt_id=_text(payload, "turn_id") or _text(payload, "prompt_id"),
        response=response.strip(),
    )
