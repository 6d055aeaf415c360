"""The question memory formation asks the LLM when its rules cannot tell what
a candidate memory means for the memories already kept.

All of an episode's open candidates go in one call, each with the owner's
most similar live memories (the same user's, or the same project and
agent's: never anyone else's). The answer is an action per candidate; an id
the candidate was not shown is refused, so a model cannot touch a memory it
was not asked about.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus_grpc.llm.llm_errors import LLMBadOutput
from nexus_grpc.llm.sampling import SamplingOptions

FORMATION_OPTIONS: SamplingOptions = {"temperature": 0.0, "num_predict": 600}
MAX_CANDIDATES = 10
ADD, UPDATE, SUPERSEDE, NOTHING = "ADD", "UPDATE", "SUPERSEDE", "NOTHING"
ACTIONS = (ADD, UPDATE, SUPERSEDE, NOTHING)
REASON_CHARS = 200

FORMATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "maxItems": MAX_CANDIDATES,
            "items": {
                "type": "object",
                "properties": {
                    "candidate": {"type": "integer"},
                    "action": {"type": "string", "enum": list(ACTIONS)},
                    "memory_id": {"type": "integer"},
                    "reason": {"type": "string"},
                },
                "required": ["candidate", "action", "memory_id", "reason"],
            },
        }
    },
    "required": ["decisions"],
}

_SYSTEM_PROMPT = """\
You keep someone's memories true and few. For each new candidate memory you are \
shown the most similar memories already kept. Decide, for each candidate:
- ADD (memory_id 0): it is new; none of the kept memories says it.
- UPDATE with a memory_id: it adds to or refines that memory, which stays true; \
the candidate's content replaces it.
- SUPERSEDE with a memory_id: it contradicts that memory, which is no longer true \
(a changed preference, a move, a new job); the old one is archived.
- NOTHING with a memory_id: that memory already says it.
Return JSON: {"decisions": [{"candidate": <number>, "action": "ADD|UPDATE|SUPERSEDE|NOTHING", \
"memory_id": <id or 0>, "reason": "<a few words>"}]}. Answer every candidate once."""


@dataclass(frozen=True)
class Kept:
    id: int
    content: str
    since: str = ""


@dataclass(frozen=True)
class Question:
    """Candidate ``number`` (1-based) of one call."""

    number: int
    content: str
    said: str = ""
    kept: Sequence[Kept] = field(default_factory=tuple)


@dataclass(frozen=True)
class Decision:
    action: str
    memory_id: int
    reason: str


def build_formation_messages(questions: Sequence[Question]) -> list[dict[str, str]]:
    lines = []
    for q in questions[:MAX_CANDIDATES]:
        when = f" (stated {q.said})" if q.said else ""
        lines.append(f'Candidate {q.number}{when}: "{q.content}"')
        lines.append("  Kept memories:")
        for k in q.kept:
            since = f" (since {k.since})" if k.since else ""
            lines.append(f'  - id {k.id}{since}: "{k.content}"')
    user = "\n".join(lines) + "\n\nDecide for each candidate."
    return [{"role": "system", "content": _SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_formation(obj: Mapping[str, Any], questions: Sequence[Question]) -> dict[int, Decision]:
    """{candidate number: decision} for the answers that hold up: a known
    action, naming a memory the candidate was shown (or 0 for ADD)."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("decisions"), list):
        raise LLMBadOutput("formation answer: expected {'decisions': [...]}")
    shown = {q.number: {k.id for k in q.kept} for q in questions}
    decided: dict[int, Decision] = {}
    for item in obj["decisions"]:
        if not isinstance(item, Mapping):
            continue
        number, action = item.get("candidate"), str(item.get("action", "")).strip().upper()
        memory_id, reason = item.get("memory_id"), str(item.get("reason", "")).strip()
        if not isinstance(number, int) or number not in shown or number in decided:
            continue
        if action not in ACTIONS or not isinstance(memory_id, int):
            continue
        if action == ADD:
            memory_id = 0
        elif memory_id not in shown[number]:
            continue
        decided[number] = Decision(action, memory_id, reason[:REASON_CHARS])
    return decided
