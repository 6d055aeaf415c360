"""Our entries in a host's hook settings: added after the user's, taken out exactly.

The three hosts share the shape (Codex's ``hooks.json`` is the same as Claude
Code's ``settings.json`` ``hooks`` key; Gemini CLI's under its event names)::

    {"hooks": {"<Event>": [{"hooks": [{"type": "command", "command": "...", "timeout": N}]}]}}

Our entry is a matcher group of its own holding one command, appended to each
event's list, after whatever the user has there. An entry is ours when its
command runs ``nexus-grpc hooks run <host>``; taking ours out removes such
commands (and a group, an event list or the ``hooks`` object they leave
empty), nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from nexus_grpc.agent_hooks import json_text
from nexus_grpc.agent_hooks.json_text import Node

__all__ = ["add", "group", "is_ours", "positions", "remove"]


def is_ours(host: str) -> Callable[[Any], bool]:
    """Whether a hook handler is one of ours for ``host``."""
    # `nexus-grpc`, by name or by path, or `python -m nexus_grpc.cli` (install's fallback).
    program = r"(?:^|[\s/'\"])(?:nexus-grpc|nexus_grpc\.cli)['\"]?"
    pattern = re.compile(program + r"\s+hooks\s+run\s+['\"]?" + re.escape(host) + r"(?:['\"\s]|$)")

    def check(handler: Any) -> bool:
        command = handler.get("command") if isinstance(handler, dict) else None
        return isinstance(command, str) and bool(pattern.search(command))

    return check


def group(command: str, timeout: int) -> dict[str, Any]:
    return {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}


def _root(text: str) -> Node:
    node = json_text.parse(text)
    if node.kind != "object":
        raise json_text.NotJSON("the settings are not a JSON object")
    return node


def _hooks(root: Node) -> Node | None:
    member = root.member("hooks")
    if member is None:
        return None
    if member.value.kind != "object":
        raise json_text.NotJSON('its "hooks" is not an object')
    return member.value


def add(text: str, groups: dict[str, dict[str, Any]]) -> str:
    """``text`` (a settings file, "" for none) with each event's group appended."""
    if not text.strip():
        text = "{}\n"
    for event, value in groups.items():
        root = _root(text)
        hooks = _hooks(root)
        if hooks is None:
            text = json_text.append(text, root, {event: [value]}, key="hooks")
            continue
        member = hooks.member(event)
        if member is None:
            text = json_text.append(text, hooks, [value], key=event)
        elif member.value.kind != "array":
            raise json_text.NotJSON(f'its "hooks"."{event}" is not a list')
        else:
            text = json_text.append(text, member.value, value)
    return text


def _find_ours(root: Node, ours: Callable[[Any], bool]) -> tuple[Node, int, bool] | None:
    """The next of our handlers: (its container, its index, whether removing it
    leaves the container empty)."""
    hooks = _hooks(root)
    if hooks is None:
        return None
    for member in hooks.members:
        if member.value.kind != "array":
            continue
        for g in member.value.elements:
            handlers = g.member("hooks") if g.kind == "object" else None
            if handlers is None or handlers.value.kind != "array":
                continue
            for i, handler in enumerate(handlers.value.elements):
                if ours(handler.data()):
                    return handlers.value, i, len(handlers.value.elements) == 1
    return None


def created_by_adding(text: str, events: Sequence[str]) -> set[str]:
    """What ``add`` would create in ``text``: ``"file"``, ``"hooks"`` and
    ``"hooks.<Event>"``, for an uninstall to take away again (a receipt)."""
    if not text.strip():
        return {"file", "hooks", *(f"hooks.{e}" for e in events)}
    hooks = _hooks(_root(text))
    if hooks is None:
        return {"hooks", *(f"hooks.{e}" for e in events)}
    return {f"hooks.{e}" for e in events if hooks.member(e) is None}


def remove(text: str, ours: Callable[[Any], bool], created: set[str] | None = None) -> str:
    """``text`` without our handlers and the groups they leave empty; an event list
    or the ``hooks`` object left empty goes too when it is in ``created`` (the
    install made it; None: unknown, so it goes)."""
    while True:
        root = _root(text)
        found = _find_ours(root, ours)
        if found is None:
            return text
        container, index, emptied = found
        if not emptied:
            text = json_text.remove(text, container, index)
            continue
        text = _remove_emptied(text, root, container, created)


def _ours_to_take(created: set[str] | None, name: str) -> bool:
    return created is None or name in created


def _remove_emptied(text: str, root: Node, handlers: Node, created: set[str] | None) -> str:
    """Removes the group whose only handler is ours, and the event list and the
    ``hooks`` object if it was their last and the install made them."""
    hooks = _hooks(root)
    assert hooks is not None
    for m_index, member in enumerate(hooks.members):
        if member.value.kind != "array":
            continue
        for g_index, g in enumerate(member.value.elements):
            inner = g.member("hooks") if g.kind == "object" else None
            if inner is None or inner.value is not handlers:
                continue
            last_group = len(member.value.elements) == 1
            if not (last_group and _ours_to_take(created, f"hooks.{member.key}")):
                return json_text.remove(text, member.value, g_index)
            if len(hooks.members) > 1 or not _ours_to_take(created, "hooks"):
                return json_text.remove(text, hooks, m_index)
            hooks_index = next(i for i, m in enumerate(root.members) if m.key == "hooks")
            return json_text.remove(text, root, hooks_index)
    raise AssertionError("the handler found is in no group")


def positions(text: str, events: Sequence[str], ours: Callable[[Any], bool]) -> dict[str, int]:
    """Each event's index of the group holding our handler (Codex's trust keys)."""
    hooks = _hooks(_root(text))
    out: dict[str, int] = {}
    if hooks is None:
        return out
    for event in events:
        member = hooks.member(event)
        if member is None or member.value.kind != "array":
            continue
        for g_index, g in enumerate(member.value.elements):
            handlers = g.member("hooks") if g.kind == "object" else None
            if handlers is None or handlers.value.kind != "array":
                continue
            if any(ours(h.data()) for h in handlers.value.elements):
                out[event] = g_index
                break
    return out
