"""Chat messages as nexus episodes, and back.

A nexus episode is one exchange: what the user said and what the assistant
answered. Extraction, memory formation and summaries read exchanges, so the
chat adapters (LangChain's history, LlamaIndex's memory block) store
messages that way:

- a user message opens an exchange; user messages before any answer are
  one turn (joined by blank lines);
- assistant messages that follow complete it (joined the same way);
- an exchange is written as soon as it has its answer; a user message whose
  answer has not come yet waits in the adapter (``Conversation.pending``),
  so a history that adds the question and, in a later call, the answer
  stores one episode, not two;
- a user message with no answer is written alone when the next user message
  comes, or when the adapter is flushed;
- any other role (system, tool, function) and an assistant message with no
  question before it have no place in an exchange: LangChain's history,
  given them by its caller, refuses them with ``ValueError`` before anything
  is written; LlamaIndex's memory block, handed whatever its ``Memory``
  flushes (tool calls included), passes over them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Conversation", "Exchange", "Role", "Said", "said_in"]

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class Said:
    role: Role
    text: str


@dataclass(frozen=True)
class Exchange:
    user: str
    assistant: str


def said_in(user: str, assistant: str) -> list[Said]:
    """An episode's messages: the user's, then the answer when there is one."""
    out = [Said("user", user)]
    if assistant:
        out.append(Said("assistant", assistant))
    return out


def _join(parts: Sequence[str]) -> str:
    return "\n\n".join(parts)


class Conversation:
    """Pairs messages into exchanges across calls; holds the unanswered question."""

    def __init__(self) -> None:
        self.pending: list[str] = []

    def plan(
        self, messages: Iterable[Said], *, skip_orphans: bool = False
    ) -> tuple[list[Exchange], list[str]]:
        """The exchanges ``messages`` complete (with what was pending) and what
        is pending after them. Changes nothing: ``commit`` does, once written.
        ``skip_orphans``: an assistant message with no question is passed over
        rather than refused (for messages a framework hands over by itself)."""
        done: list[Exchange] = []
        asked = list(self.pending)
        answered: list[str] = []
        for n, message in enumerate(messages):
            if message.role == "user":
                if answered:
                    done.append(Exchange(_join(asked), _join(answered)))
                    asked, answered = [], []
                asked.append(message.text)
            elif message.role == "assistant":
                if not asked:
                    if skip_orphans:
                        continue
                    raise ValueError(
                        f"message {n} is an assistant message with no user message before it"
                        " to answer; a nexus episode is a user message and its answer"
                    )
                answered.append(message.text)
            else:  # pragma: no cover - Role is checked by the adapters' converters
                raise ValueError(f"message {n} has role {message.role!r}")
        if answered:
            done.append(Exchange(_join(asked), _join(answered)))
            asked = []
        return done, asked

    def commit(self, pending: list[str]) -> None:
        self.pending = pending

    def unanswered(self) -> Exchange | None:
        """The pending question as an exchange without an answer (for a flush)."""
        if not self.pending:
            return None
        return Exchange(_join(self.pending), "")
