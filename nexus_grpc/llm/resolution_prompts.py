"""The question entity resolution asks the LLM when its rules cannot settle a
name: which known entity, if any, each unsettled name refers to.

All of an episode's unsettled names go in one call, each with its candidates'
names, aliases, notes and a line of their recent mentions, and the exchange
the names came from. The answer is an id per name; 0 means "none of these".
An id that was not offered is dropped, so a model cannot merge into an
entity nobody showed it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus_grpc.llm.llm_errors import LLMBadOutput
from nexus_grpc.llm.sampling import SamplingOptions

RESOLUTION_OPTIONS: SamplingOptions = {"temperature": 0.0, "num_predict": 400}
MAX_QUESTIONS = 20
MAX_CANDIDATES = 5
MENTION_CHARS = 160

RESOLUTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answers": {
            "type": "array",
            "maxItems": MAX_QUESTIONS,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "integer"},
                    "entity_id": {"type": "integer"},
                },
                "required": ["name", "entity_id"],
            },
        }
    },
    "required": ["answers"],
}

_SYSTEM_PROMPT = """\
You keep a knowledge graph free of duplicates. Names were just mentioned in a \
conversation; for each, decide which known entity it refers to, if any.
Return JSON: {"answers": [{"name": <number of the name>, "entity_id": <id>}]}.

Rules:
- Answer with the id of the candidate that is the same real-world thing as the name.
- Answer 0 when it is none of them: a different person, place or thing with a similar name.
- Only match when the conversation or the candidates' notes make it clear. \
If you cannot tell, answer 0.
- Answer every name once."""


@dataclass(frozen=True)
class Candidate:
    id: int
    name: str
    type: str
    aliases: Sequence[str] = ()
    notes: str | None = None
    mentions: Sequence[str] = ()


@dataclass(frozen=True)
class Question:
    """Name ``number`` (1-based) of one call."""

    number: int
    name: str
    type: str
    notes: str | None
    candidates: Sequence[Candidate] = field(default_factory=tuple)


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def build_resolution_messages(context: str, questions: Sequence[Question]) -> list[dict[str, str]]:
    lines = []
    for q in questions[:MAX_QUESTIONS]:
        about = f": {_clip(q.notes, MENTION_CHARS)}" if q.notes else ""
        lines.append(f'{q.number}. "{q.name}" ({q.type}){about}')
        for c in q.candidates[:MAX_CANDIDATES]:
            also = [a for a in c.aliases if a != c.name]
            parts = [f"   - id {c.id}: {c.name} ({c.type})"]
            if also:
                parts.append(f"; also called {', '.join(also[:6])}")
            if c.notes:
                parts.append(f"; {_clip(c.notes, MENTION_CHARS)}")
            lines.append("".join(parts))
            for said in c.mentions[:2]:
                lines.append(f'     mentioned in: "{_clip(said, MENTION_CHARS)}"')
    user = (
        f"Conversation:\n{context}\n\nNames and their candidates:\n"
        + "\n".join(lines)
        + "\n\nAnswer with the id each name refers to, or 0."
    )
    return [{"role": "system", "content": _SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_resolution(obj: Mapping[str, Any], questions: Sequence[Question]) -> dict[int, int]:
    """{question number: entity id or 0}; only ids that question offered."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("answers"), list):
        raise LLMBadOutput("resolution answer: expected {'answers': [...]}")
    offered = {q.number: {c.id for c in q.candidates} for q in questions}
    answers: dict[int, int] = {}
    for item in obj["answers"]:
        if not isinstance(item, Mapping):
            continue
        number, entity_id = item.get("name"), item.get("entity_id")
        if not isinstance(number, int) or not isinstance(entity_id, int):
            continue
        if number not in offered or number in answers:
            continue
        if entity_id == 0 or entity_id in offered[number]:
            answers[number] = entity_id
    return answers
