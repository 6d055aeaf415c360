"""Memory formation's words to the LLM: what it adds to an extraction's
question, and the question it asks when its rules cannot tell what a
candidate memory means for the memories already kept.

An episode's extraction call (llm/extraction_prompts.py) also proposes
memory candidates when formation applies to it: the rules for them
(``memory_rules``), the ``memories`` part of the answer's schema
(``MEMORIES_PROPERTY``) and the filter that keeps only the candidates the
user's own words support (``parse_memories``) are formation's, and only
extraction's prompt builder and parser use them.

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

# Bounds on an extraction answer's memory candidates (see extraction_prompts.py
# on why an answer's lists are bounded).
MAX_MEMORIES_PER_ANSWER = 10
MAX_MEMORY_CHARS = 500
# Formation modes an extraction prompt is built for (domain/formation.py).
FORM_USER = "user"
FORM_USER_AND_PROJECT = "user_and_project"
MEMORY_TIERS = ("longterm", "session", "task")

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


_MEMORY_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        # "user": about the person; "project": about the project's work.
        "about": {"type": "string"},
        "title": {"type": "string"},
        "content": {"type": "string"},
        # "longterm" (lasting), "session" (this conversation) or "task" (the task at hand).
        "tier": {"type": "string"},
        # The user's own words it rests on, copied from the user message.
        "quote": {"type": "string"},
    },
    "required": ["about", "title", "content", "tier", "quote"],
}

#: The ``memories`` property an extraction answer's schema gains when
#: formation is on for the episode.
MEMORIES_PROPERTY: dict[str, Any] = {
    "type": "array",
    "maxItems": MAX_MEMORIES_PER_ANSWER,
    "items": _MEMORY_ITEM,
}

_MEMORY_RULES = {
    FORM_USER: """\

Also return "memories": lasting facts and preferences the USER states about \
themselves, worth remembering in later conversations ("I'm vegetarian", "I moved to \
Porto", "call me Sam"). Each: {"about": "user", "title": a few words, "content": one \
sentence in the third person ("The user is vegetarian."), "tier": "longterm" \
(or "task" if it only matters for the task at hand right now, "session" for this \
conversation), "quote": the user's own words it rests on, copied exactly}.
Never a memory: greetings, questions, requests, small talk, or anything only the AI \
said or suggested. When the user corrects an earlier fact, state the new fact. \
If there is nothing lasting, return "memories": [].""",
    FORM_USER_AND_PROJECT: """\

Also return "memories": lasting facts and preferences the USER states about \
themselves ("about": "user"), and decisions or facts about the project's work the \
user states ("about": "project": "We deploy on Fridays", "The API is versioned \
under /v2"). Each: {"about", "title": a few words, "content": one sentence in the \
third person, "tier": "longterm" (or "task" if it only matters for the task at \
hand right now, "session" for this conversation), "quote": the user's own words it \
rests on, copied exactly}.
Never a memory: greetings, questions, requests, small talk, or anything only the AI \
said or suggested. When the user corrects an earlier fact, state the new fact. \
If there is nothing lasting, return "memories": [].""",
}


def memory_rules(formation: str) -> str:
    """What an extraction's instructions add for the memories ``formation``
    (FORM_USER or FORM_USER_AND_PROJECT) asks for."""
    return _MEMORY_RULES[formation]


@dataclass(frozen=True, slots=True)
class MemoryCandidate:
    """A memory an exchange proposes: about the user or the project."""

    about: str  # "user" or "project"
    title: str
    content: str
    tier: str  # "longterm", "session" or "task"
    quote: str


def _words(text: str) -> list[str]:
    return "".join(c.lower() if c.isalnum() else " " for c in text).split()


def _quoted(quote: str, said: str) -> bool:
    """Whether ``quote`` is the user's own words: its words appear, in order
    and together, in what the user said (case, punctuation and spacing aside)."""
    mine, theirs = _words(quote), _words(said)
    if len(mine) < 2:
        return False
    n = len(mine)
    return any(theirs[i : i + n] == mine for i in range(len(theirs) - n + 1))


def parse_memories(raw: object, user_message: str, formation: str | None) -> list[MemoryCandidate]:
    """Memory candidates that hold up: about the user (or the project, when
    formation covers it), resting on words the user actually said (never the
    assistant's claims, which the quote would not be found in), and not a
    question or a fragment."""
    if not isinstance(raw, list):
        return []
    allowed = {"user"} if formation == FORM_USER else {"user", "project"}
    kept: list[MemoryCandidate] = []
    seen: set[str] = set()
    for item in raw[:MAX_MEMORIES_PER_ANSWER]:
        if not isinstance(item, Mapping):
            continue
        about = str(item.get("about", "")).strip().lower()
        content = " ".join(str(item.get("content", "")).split())[:MAX_MEMORY_CHARS]
        title = " ".join(str(item.get("title", "")).split())[:200] or content[:60]
        tier = str(item.get("tier", "longterm")).strip().lower()
        quote = str(item.get("quote", ""))
        if about not in allowed or len(_words(content)) < 3 or content.endswith("?"):
            continue
        if not _quoted(quote, user_message):
            continue
        key = " ".join(_words(content))
        if key in seen:
            continue
        seen.add(key)
        kept.append(
            MemoryCandidate(
                about, title, content, tier if tier in MEMORY_TIERS else "longterm", quote
            )
        )
    return kept
