"""Chat messages as nexus episodes, and back: the one rule both chat adapters
(LangChain's history, LlamaIndex's memory block) follow.

A nexus episode is one exchange: what the user said and what the assistant
answered. Extraction, memory formation, search and summaries read exchanges,
so messages are stored that way:

- a user message opens an exchange; user messages before any answer are one
  turn (joined by blank lines);
- the assistant's side follows, in order, as text: its answers, the tools it
  called (``[tool call] name({"arg": ...})``) and what they returned
  (``[tool result] name: ...``, at most ``MAX_TOOL_TEXT`` characters of a
  result or of a call's arguments), so an agent's tool-calling turn (user,
  assistant with tool calls, tool results, final answer) is one exchange
  that search and extraction read whole;
- an exchange is written once it has an answer and no tool call waits for
  its result or for the answer after it; until then it waits in the adapter
  (``Conversation.pending``), so a turn added one message at a time is
  still one episode; a user message with no answer is written alone when
  the next user message comes, or when the adapter is flushed;
- a system message, and an assistant message with no question before it (a
  greeting, a second answer added after its exchange was written), are kept
  with the next exchange, in its episode's metadata (``messages_before``),
  outside the text extraction reads: a system prompt is the application's
  instruction, not something the user said. They are read back before that
  exchange's user message;
- a non-text part of a message (an image, a file) is kept as its kind in
  brackets (``[image]``); a model's reasoning is not kept.

So nothing a conversation holds is refused. Read back, an exchange is its
messages before, the user message and the assistant's side as one message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BEFORE",
    "MAX_TOOL_TEXT",
    "Conversation",
    "Exchange",
    "Role",
    "Said",
    "ToolCall",
    "arguments_text",
    "said_in",
]

Role = Literal["user", "assistant", "tool", "system"]
#: The most characters of one tool result, or of one call's arguments, kept.
MAX_TOOL_TEXT = 2_000
#: The episode metadata key holding the messages kept before its exchange.
BEFORE = "messages_before"


@dataclass(frozen=True)
class ToolCall:
    name: str
    #: The arguments as JSON text (or as the model gave them, when not JSON).
    arguments: str
    id: str = ""


@dataclass(frozen=True)
class Said:
    """One chat message, as the adapters read a framework's."""

    role: Role
    text: str
    #: An assistant message's tool calls.
    calls: tuple[ToolCall, ...] = ()
    #: A tool result: the tool's name, when the message says it.
    tool: str = ""
    #: A tool result: the id of the call it answers.
    call_id: str = ""
    #: The framework's own message, shown as it is while it waits unwritten.
    original: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Exchange:
    user: str
    assistant: str
    #: System messages and assistant messages with no question, kept before it.
    before: tuple[Said, ...] = ()

    def metadata(self) -> dict[str, Any]:
        """The episode metadata that keeps ``before`` (empty when there is none)."""
        if not self.before:
            return {}
        return {BEFORE: [{"role": s.role, "text": s.text} for s in self.before]}


def arguments_text(arguments: Any) -> str:
    """A tool call's arguments as JSON text (a string is taken as given)."""
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(arguments)


def said_in(user: str, assistant: str, metadata: dict[str, Any] | None = None) -> list[Said]:
    """An episode's messages: those kept before it, the user's, then the answer."""
    out: list[Said] = []
    for kept in (metadata or {}).get(BEFORE) or []:
        if isinstance(kept, dict) and kept.get("role") in ("system", "assistant"):
            out.append(Said(kept["role"], str(kept.get("text", ""))))
    out.append(Said("user", user))
    if assistant:
        out.append(Said("assistant", assistant))
    return out


def _cut(text: str) -> str:
    if len(text) <= MAX_TOOL_TEXT:
        return text
    return f"{text[:MAX_TOOL_TEXT]}… ({len(text) - MAX_TOOL_TEXT:,} more characters)"


def _join(parts: Sequence[str]) -> str:
    return "\n\n".join(parts)


class _Turn:
    """The exchange being built from messages, and where its messages start."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.before: list[Said] = []
        self.asked: list[str] = []
        self.answer: list[str] = []
        # Messages kept for the next exchange: a system message after an answer.
        self.after: list[tuple[int, Said]] = []
        # Whether a tool call waits for its result, or a result for the answer.
        self.waiting = False
        self.tools: dict[str, str] = {}

    def exchange(self) -> Exchange:
        return Exchange(_join(self.asked), _join(self.answer), tuple(self.before))

    def assistant_side(self, said: Said) -> None:
        if said.role == "tool":
            name = said.tool or self.tools.get(said.call_id) or "tool"
            self.answer.append(f"[tool result] {name}: {_cut(said.text)}")
            self.waiting = True  # the answer after the result is still to come
            return
        lines = [said.text] if said.text.strip() else []
        for call in said.calls:
            lines.append(f"[tool call] {call.name}({_cut(call.arguments)})")
            if call.id:
                self.tools[call.id] = call.name
        if lines:
            self.answer.append("\n".join(lines))
        self.waiting = bool(said.calls)


def _kept_before(said: Said) -> Said:
    """A message kept outside an exchange, as it is stored and read back."""
    if said.role == "system":
        return said
    turn = _Turn(0)
    turn.assistant_side(said)
    return Said("assistant", _join(turn.answer) or said.text)


def _walk(said: Sequence[Said]) -> tuple[list[Exchange], _Turn]:
    """The exchanges a user message closed in ``said``, and the turn left open."""
    done: list[Exchange] = []
    turn = _Turn(0)
    for n, message in enumerate(said):
        if message.role == "user":
            if turn.answer:
                done.append(turn.exchange())
                carried, turn = turn.after, _Turn(turn.after[0][0] if turn.after else n)
                turn.before = [s for _, s in carried]
            turn.asked.append(message.text)
        elif message.role == "system":
            if turn.answer:
                turn.after.append((n, message))
            else:
                turn.before.append(message)
        elif not turn.asked:
            turn.before.append(_kept_before(message))
        else:
            # The answer goes on: what was kept for the next exchange is this one's.
            turn.before += [s for _, s in turn.after]
            turn.after = []
            turn.assistant_side(message)
    return done, turn


class Conversation:
    """Pairs messages into exchanges across calls; holds what is not yet written."""

    def __init__(self) -> None:
        self.pending: list[Said] = []

    def plan(self, messages: Iterable[Said]) -> tuple[list[Exchange], list[Said]]:
        """The exchanges ``messages`` complete (after what was pending) and what
        is pending after them. Changes nothing: ``commit`` does, once written."""
        said = [*self.pending, *messages]
        done, turn = _walk(said)
        if turn.answer and not turn.waiting:
            done.append(turn.exchange())
            return done, said[turn.after[0][0] if turn.after else len(said) :]
        return done, said[turn.start :]

    def commit(self, pending: list[Said]) -> None:
        self.pending = pending

    def unanswered(self) -> tuple[Exchange | None, list[Said]]:
        """The pending exchange as it stands, for a flush (None while no user
        message opened it), and what still waits after it is written: system
        messages kept for the next exchange."""
        _, turn = _walk(self.pending)
        if not turn.asked:
            return None, self.pending
        rest = turn.after[0][0] if turn.after else len(self.pending)
        return turn.exchange(), self.pending[rest:]
