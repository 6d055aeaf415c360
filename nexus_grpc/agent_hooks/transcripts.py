"""The last exchange of a session, read from the end of the host's transcript.

A stop event carries the answer but not always the prompt or its id, which the
host's own transcript (JSON Lines) has:

- Claude Code: the prompt is the last ``type: "user"`` entry whose message is
  the user's text (not a tool result, not one of Claude's own ``isMeta``
  entries); its ``promptId`` names the prompt.
- Codex CLI: the ``response_item`` user message whose turn is the stop's
  ``turn_id``.
- Gemini CLI: the stop has the prompt; the transcript's last user message
  with the same words has the id.

Only the end of the file is read, a block at a time, up to a bound: a long
session's transcript runs to megabytes and the hook has a hard deadline.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from nexus_grpc.agent_hooks.payloads import without_hook_context

__all__ = ["Turn", "last_turn", "lines_from_end"]

_BLOCK = 64 * 1024
#: How far back a prompt is looked for (a turn with many tool calls is long).
MAX_BYTES_READ = 16 * 1024 * 1024


@dataclass(frozen=True)
class Turn:
    prompt: str = ""
    prompt_id: str = ""
    response: str = ""


def lines_from_end(path: str, limit: int = MAX_BYTES_READ) -> Iterator[bytes]:
    """The file's lines, last first, reading at most ``limit`` bytes."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        position = fh.tell()
        read = 0
        tail = b""
        while position > 0 and read < limit:
            step = min(_BLOCK, position)
            position -= step
            fh.seek(position)
            chunk = fh.read(step) + tail
            read += step
            lines = chunk.split(b"\n")
            tail = lines[0]
            for line in reversed(lines[1:]):
                if line.strip():
                    yield line
        if position == 0 and tail.strip():
            yield tail


def _records(path: str) -> Iterator[dict[str, Any]]:
    for line in lines_from_end(path):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written as we read, or not ours to judge
        if isinstance(record, dict):
            yield record


def _texts(content: Any, kinds: tuple[str, ...], *, only: bool = True) -> str | None:
    """The text of a message's content: a string, or its text parts joined; None
    when ``only`` and it has parts that are not text (a tool call's result)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        # Gemini's parts name no type: a part with text is text.
        kind = part.get("type", "text" if "text" in part else None)
        if kind in kinds and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif only and kind is not None and kind not in kinds:
            return None
    return "\n".join(texts) if texts else None


def _claude_turn(path: str) -> Turn:
    response = ""
    for record in _records(path):
        kind = record.get("type")
        message = record.get("message")
        if not isinstance(message, dict):
            continue
        if kind == "assistant" and not response:
            response = (_texts(message.get("content"), ("text",), only=False) or "").strip()
            continue
        if kind != "user" or record.get("isMeta") or record.get("isCompactSummary"):
            continue
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") == "tool_result" for part in content
        ):
            continue  # a tool's result goes back to the model as a user message
        text = _texts(content, ("text",), only=False)
        if text is None or text.lstrip().startswith(("<command-", "<local-command-")):
            continue  # a slash command's echo
        prompt_id = record.get("promptId") or record.get("uuid") or ""
        return Turn(text.strip(), str(prompt_id), response)
    return Turn(response=response)


def _codex_turn(path: str, turn_id: str) -> Turn:
    for record in _records(path):
        payload = record.get("payload")
        if record.get("type") != "response_item" or not isinstance(payload, dict):
            continue
        if payload.get("type") != "message" or payload.get("role") != "user":
            continue
        passthrough = payload.get("internal_chat_message_metadata_passthrough") or {}
        if turn_id and passthrough.get("turn_id") != turn_id:
            continue
        text = _texts(payload.get("content"), ("input_text", "text"), only=False)
        if text and not text.lstrip().startswith("<environment_context>"):
            return Turn(text.strip(), turn_id)
    return Turn(prompt_id=turn_id)


def _gemini_messages(record: dict[str, Any]) -> list[dict[str, Any]]:
    if record.get("type") in ("user", "gemini") and "id" in record:
        return [record]
    update = record.get("$set")
    found = update.get("messages") if isinstance(update, dict) else None
    return [m for m in reversed(found) if isinstance(m, dict)] if isinstance(found, list) else []


def _gemini_turn(path: str, prompt: str) -> Turn:
    """The id of the last user message that is ``prompt`` (the stop's own)."""
    for record in _records(path):
        for message in _gemini_messages(record):
            if message.get("type") != "user":
                continue
            content = message.get("displayContent") or message.get("content")
            text = without_hook_context(_texts(content, ("text",), only=False) or "")
            if text == prompt or not prompt and not text.startswith("<session_context>"):
                return Turn(text, str(message.get("id") or ""))
    return Turn()


def last_turn(host: str, path: str, *, turn_id: str = "", prompt: str = "") -> Turn:
    """The transcript's last prompt (its text and id; Codex: the prompt of
    ``turn_id``; Gemini: the last message that is ``prompt``) and, for Claude
    Code, the answer after it. Raises ``OSError`` when the file cannot be read."""
    if host == "claude-code":
        return _claude_turn(path)
    if host == "codex":
        return _codex_turn(path, turn_id)
    return _gemini_turn(path, prompt)
