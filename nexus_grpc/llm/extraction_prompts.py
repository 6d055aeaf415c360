"""Entity/relationship extraction: prompt, JSON schema, and the output filter.

The model is small (qwen2.5:3b), so its output is constrained by a JSON schema
(Ollama structured outputs) and then filtered hard: only six entity types, no
pleasantries or chat roles as "entities", snake_case edge labels, and no edge
whose ends were dropped.

When formation is on for the episode, the same call also proposes memory
candidates; their rules, schema and filter are formation's own
(llm/formation_prompts.py), joined in here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus_grpc.llm.formation_prompts import (
    MEMORIES_PROPERTY,
    MemoryCandidate,
    memory_rules,
    parse_memories,
)
from nexus_grpc.llm.llm_errors import LLMBadOutput
from nexus_grpc.llm.sampling import SamplingOptions
from nexus_grpc.llm.text import to_snake_case

EXTRACTION_MODEL = "qwen2.5:3b"
EXTRACTION_OPTIONS: SamplingOptions = {"temperature": 0.1, "num_predict": 1500}
MAX_KNOWN_ENTITIES = 20
# Current facts shown so the model can say which ones an exchange ends.
MAX_CURRENT_FACTS = 30
# Bounds in the schema: a small model otherwise loops inside valid JSON until
# num_predict cuts it off (seen on a real model: 54 of 56 calls).
MAX_ENTITIES_PER_ANSWER = 30
MAX_RELATIONSHIPS_PER_ANSWER = 30
MAX_ENDED_PER_ANSWER = 10

ENTITY_TYPES: frozenset[str] = frozenset(
    {"person", "place", "project", "technology", "concept", "organization"}
)

# Compared lower-cased and trimmed.  Greetings, acknowledgements, the two chat
# roles and bare pronouns are what small models most often promote to entities.
IGNORED_NAMES: frozenset[str] = frozenset(
    {
        "hello", "hi", "hey", "hiya", "greetings", "welcome",
        "thanks", "thank you", "thank you so much", "thanks a lot", "thx", "cheers",
        "good morning", "good afternoon", "good evening", "good night",
        "bye", "goodbye", "see you", "ok", "okay", "k", "yes", "yeah", "yep",
        "no", "nope", "sure", "please", "sorry", "great", "cool", "nice",
        "user", "the user", "assistant", "the assistant", "ai", "ai assistant",
        "bot", "chatbot", "human", "me", "you", "i", "we", "they", "he", "she",
        "it", "this", "that", "someone", "something", "anything", "everything",
        "nothing", "question", "answer", "help", "none", "null", "n/a", "unknown",
    }
)  # fmt: skip

_NOTES = {"type": ["string", "null"]}
EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "maxItems": MAX_ENTITIES_PER_ANSWER,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    # Free string, not an enum: an enum forces junk (events,
                    # dates) into one of the six types; the filter drops it instead.
                    "type": {"type": "string"},
                    "notes": _NOTES,
                },
                "required": ["name", "type", "notes"],
            },
        },
        "relationships": {
            "type": "array",
            "maxItems": MAX_RELATIONSHIPS_PER_ANSWER,
            "items": {
                "type": "object",
                "properties": {
                    "from": {"type": "string"},
                    "to": {"type": "string"},
                    "label": {"type": "string"},
                    "notes": _NOTES,
                },
                "required": ["from", "to", "label", "notes"],
            },
        },
        # Current facts (shown in the prompt) that this exchange says no
        # longer hold: "Priya left Acme".
        "ended": {
            "type": "array",
            "maxItems": MAX_ENDED_PER_ANSWER,
            "items": {
                "type": "object",
                "properties": {
                    "from": {"type": "string"},
                    "to": {"type": "string"},
                    "label": {"type": "string"},
                },
                "required": ["from", "to", "label"],
            },
        },
    },
    "required": ["entities", "relationships"],
}


def extraction_schema(formation: str | None = None) -> dict[str, Any]:
    """The answer's schema; with memory candidates when ``formation`` is on."""
    if formation is None:
        return EXTRACTION_SCHEMA
    return {
        **EXTRACTION_SCHEMA,
        "properties": {
            **EXTRACTION_SCHEMA["properties"],
            "memories": MEMORIES_PROPERTY,
        },
    }


# Labels a model gives for a change of state, and the state's own label: a
# move is where one lives from then on, and single-valued labels
# (domain/graph.py) end the previous value only when both use one label.
LABEL_SYNONYMS: dict[str, str] = {
    "moved_to": "lives_in",
    "relocated_to": "lives_in",
    "resides_in": "lives_in",
    "lives_at": "lives_in",
    "based_in": "lives_in",
    "joined": "works_at",
    "works_for": "works_at",
    "employed_by": "works_at",
    "employed_at": "works_at",
    "hired_by": "works_at",
    "married": "married_to",
    "wed": "married_to",
    "reports_into": "reports_to",
    "managed_by": "reports_to",
}

_SYSTEM_PROMPT = """\
You build a knowledge graph from one exchange between a user and an AI assistant.
Return JSON: {"entities": [{"name", "type", "notes"}], \
"relationships": [{"from", "to", "label", "notes"}], "ended": [{"from", "to", "label"}]}.

Rules:
- Entity "type" is one of: person, place, project, technology, concept, organization.
- Only extract specific things worth remembering later (people, products, tools, \
projects, companies, places, ideas). Never extract greetings, thanks, yes/no, or \
the user/assistant themselves.
- When an entity is already known, reuse its exact spelling from the known list.
- "from" and "to" must be names from your "entities" list.
- "label" is a short verb phrase in snake_case for what holds, e.g. works_at, uses, \
part_of, located_in, lives_in (a move to a city is lives_in that city).
- "notes" is one short sentence of context, or null.
- "ended" lists current facts (from the list you are shown) that the exchange says \
no longer hold, e.g. someone left a company; use the names and label as shown.
- If nothing is worth extracting, return {"entities": [], "relationships": [], "ended": []}."""


@dataclass(frozen=True, slots=True)
class KnownEntity:
    """An entity the prompt names, so the model reuses its spelling."""

    name: str
    type: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CurrentFact:
    source: str
    label: str
    target: str
    since: str = ""


@dataclass(frozen=True, slots=True)
class ExtractedEntity:
    name: str
    type: str
    notes: str | None


@dataclass(frozen=True, slots=True)
class ExtractedRelationship:
    source: str
    target: str
    label: str
    notes: str | None


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    entities: list[ExtractedEntity]
    relationships: list[ExtractedRelationship]
    # How many parts the episode was split into to fit the model's context.
    parts: int = 1
    # Facts the exchange says no longer hold (notes always None).
    ended: list[ExtractedRelationship] = field(default_factory=list)
    # Memory candidates (only when formation is on for the episode).
    memories: list[MemoryCandidate] = field(default_factory=list)


def build_extraction_messages(
    user_message: str,
    ai_response: str,
    known_entities: Sequence[KnownEntity | tuple[str, str]],
    facts: Sequence[CurrentFact] = (),
) -> list[dict[str, str]]:
    """Chat messages for one episode.

    ``known_entities``: at most the last ``MAX_KNOWN_ENTITIES`` are listed,
    with their other names, so the model reuses a spelling instead of
    creating a near-duplicate ("Postgres" vs "PostgreSQL"). ``facts``: the
    current facts about entities the exchange names, so it can end them.
    """
    return build_extraction_part_messages(
        exchange_text(user_message, ai_response), known_entities, facts=facts
    )


def exchange_text(user_message: str, ai_response: str) -> str:
    return f"User message:\n{user_message}\n\nAI response:\n{ai_response}"


def _known_line(entity: KnownEntity | tuple[str, str]) -> str:
    if not isinstance(entity, KnownEntity):
        entity = KnownEntity(*entity)
    others = [a for a in entity.aliases if a != entity.name][:4]
    also = f"; also {', '.join(others)}" if others else ""
    return f"- {entity.name} ({entity.type}{also})"


def build_extraction_part_messages(
    exchange: str,
    known_entities: Sequence[KnownEntity | tuple[str, str]],
    part: tuple[int, int] | None = None,
    facts: Sequence[CurrentFact] = (),
    formation: str | None = None,
) -> list[dict[str, str]]:
    """Messages for an exchange (``exchange_text``) or, ``part=(i, n)``, for
    the i-th of n consecutive parts of a long one."""
    known = list(known_entities)[-MAX_KNOWN_ENTITIES:]
    known_block = "\n".join(_known_line(e) for e in known) or "(none yet)"
    facts_block = ""
    if facts:
        lines = [
            f"- {f.source} {f.label} {f.target}" + (f" (since {f.since})" if f.since else "")
            for f in list(facts)[:MAX_CURRENT_FACTS]
        ]
        facts_block = "Current facts about entities named here:\n" + "\n".join(lines) + "\n\n"
    where = ""
    if part is not None:
        where = (
            f"The exchange is long; this is part {part[0]} of {part[1]}."
            " Extract from this part only.\n\n"
        )
    user = (
        f"Known entities:\n{known_block}\n\n{facts_block}{where}{exchange}\n\n"
        "Extract the entities and relationships as JSON."
    )
    system = _SYSTEM_PROMPT + (memory_rules(formation) if formation else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def merge_results(results: Sequence[ExtractionResult]) -> ExtractionResult:
    """One result from the parts of a split episode: each entity and edge once
    (first spelling kept, notes from the first part that had some)."""
    entities: dict[tuple[str, str], ExtractedEntity] = {}
    edges: dict[tuple[str, str, str], ExtractedRelationship] = {}
    ended: dict[tuple[str, str, str], ExtractedRelationship] = {}
    memories: dict[str, MemoryCandidate] = {}
    for result in results:
        for c in result.memories:
            memories.setdefault(" ".join(c.content.lower().split()), c)
        for r in result.ended:
            ended.setdefault((r.source.lower(), r.target.lower(), r.label), r)
        for e in result.entities:
            key = (e.name.lower(), e.type)
            kept = entities.get(key)
            if kept is None:
                entities[key] = e
            elif kept.notes is None and e.notes is not None:
                entities[key] = ExtractedEntity(kept.name, kept.type, e.notes)
        for r in result.relationships:
            edge = (r.source.lower(), r.target.lower(), r.label)
            if edge not in edges:
                edges[edge] = r
    return ExtractionResult(
        list(entities.values()),
        list(edges.values()),
        parts=len(results),
        ended=list(ended.values()),
        memories=list(memories.values()),
    )


def parse_extraction(
    obj: Mapping[str, Any], user_message: str | None = None, formation: str | None = None
) -> ExtractionResult:
    """Validate and filter a model answer.

    A wrong top-level shape raises ``LLMBadOutput`` (worth a retry); individual
    malformed items are skipped (the rest of the answer is still useful).
    """
    if not isinstance(obj, Mapping):
        raise LLMBadOutput(f"extraction answer is {type(obj).__name__}, expected an object")
    # 'entities' is required (an answer without it is not an extraction);
    # a missing 'relationships' just means none.
    raw_entities = obj.get("entities")
    raw_relationships = obj.get("relationships", [])
    if not isinstance(raw_entities, list) or not isinstance(raw_relationships, list):
        raise LLMBadOutput(
            "extraction answer: 'entities' must be a list and 'relationships' a list "
            f"(got keys {sorted(obj)[:10]})"
        )

    entities: list[ExtractedEntity] = []
    seen: set[tuple[str, str]] = set()
    canonical: dict[str, str] = {}  # lower name -> spelling kept, for edge ends
    types_of: dict[str, set[str]] = {}  # lower name -> the types it was given
    for item in raw_entities:
        if not isinstance(item, Mapping):
            continue
        name = _clean_name(item.get("name"))
        etype = item.get("type")
        if name is None or not isinstance(etype, str):
            continue
        etype = etype.strip().lower()
        if etype not in ENTITY_TYPES or name.lower() in IGNORED_NAMES:
            continue
        key = (name.lower(), etype)
        if key in seen:
            continue
        seen.add(key)
        canonical.setdefault(name.lower(), name)
        types_of.setdefault(name.lower(), set()).add(etype)
        entities.append(ExtractedEntity(name=name, type=etype, notes=_clean_notes(item)))

    relationships: list[ExtractedRelationship] = []
    seen_edges: set[tuple[str, str, str]] = set()
    for item in raw_relationships:
        if not isinstance(item, Mapping):
            continue
        source = _clean_name(item.get("from"))
        target = _clean_name(item.get("to"))
        label = item.get("label")
        if source is None or target is None or not isinstance(label, str):
            continue
        src, dst = canonical.get(source.lower()), canonical.get(target.lower())
        label = canonical_label(label)
        # Both ends must be entities kept above; a self-loop says nothing
        # (one name of two types, "Jordan" flying to Jordan, is two ends).
        if src is None or dst is None or not label:
            continue
        if src.lower() == dst.lower() and len(types_of[src.lower()]) < 2:
            continue
        edge = (src.lower(), dst.lower(), label)
        if edge in seen_edges:
            continue
        seen_edges.add(edge)
        relationships.append(
            ExtractedRelationship(source=src, target=dst, label=label, notes=_clean_notes(item))
        )
    memories = (
        parse_memories(obj.get("memories"), user_message, formation)
        if formation and user_message is not None
        else []
    )
    return ExtractionResult(
        entities=entities,
        relationships=relationships,
        ended=_parse_ended(obj.get("ended")),
        memories=memories,
    )


def canonical_label(label: str) -> str:
    """snake_case, with a change of state turned into the state it leaves."""
    snake = to_snake_case(label)
    return LABEL_SYNONYMS.get(snake, snake)


def _parse_ended(raw: object) -> list[ExtractedRelationship]:
    """Ended facts name entities the prompt showed, which need not be in this
    answer's entities; the domain resolves them against the graph."""
    if not isinstance(raw, list):
        return []
    ended: list[ExtractedRelationship] = []
    seen: set[tuple[str, str, str]] = set()
    for item in raw:
        if not isinstance(item, Mapping):
            continue
        source, target = _clean_name(item.get("from")), _clean_name(item.get("to"))
        label = item.get("label")
        if source is None or target is None or not isinstance(label, str):
            continue
        label = canonical_label(label)
        edge = (source.lower(), target.lower(), label)
        if not label or edge[0] == edge[1] or edge in seen:
            continue
        seen.add(edge)
        ended.append(ExtractedRelationship(source, target, label, None))
    return ended


def _clean_name(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    name = " ".join(value.split())  # trim and collapse inner whitespace
    return name or None


def _clean_notes(item: Mapping[str, Any]) -> str | None:
    notes = item.get("notes")
    if not isinstance(notes, str):
        return None
    return notes.strip() or None
