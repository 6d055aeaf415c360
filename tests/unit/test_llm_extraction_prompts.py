"""The extraction prompt and what is kept of its answer
(llm/extraction_prompts.py): the exchange and the last 20 known entities in
the prompt; names that are no entities, duplicates, self-loops and edges to
dropped entities filtered out of the answer; an answer of the wrong shape
refused.

The answer coming back from a served model (the schema sent in ``format``,
an answer that ignores it) is tested against the Ollama stand-in in
tests/integration/llm/test_llm.py and tests/integration/llm/test_llm_budget.py."""

from __future__ import annotations

import pytest

from nexus_grpc.llm import LLMBadOutput
from nexus_grpc.llm.extraction_prompts import (
    EXTRACTION_SCHEMA,
    ExtractedEntity,
    ExtractedRelationship,
    build_extraction_messages,
    parse_extraction,
)


def test_extraction_prompt_contents() -> None:
    known = [(f"Entity{i}", "concept") for i in range(25)]
    msgs = build_extraction_messages("I work at Acme on Nexus.", "Nice, Nexus sounds fun.", known)
    prompt = "\n".join(m["content"] for m in msgs)
    assert "I work at Acme on Nexus." in prompt and "Nice, Nexus sounds fun." in prompt
    listed = [f"Entity{i} (concept)" for i in range(5, 25)]
    assert all(item in prompt for item in listed)  # the last 20
    assert "Entity4 (concept)" not in prompt
    assert msgs[0]["role"] == "system" and msgs[-1]["role"] == "user"


def test_extraction_filters() -> None:
    result = parse_extraction(
        {
            "entities": [
                {"name": " Alice ", "type": "Person", "notes": "engineer"},
                {"name": "alice", "type": "person", "notes": "dup"},
                {"name": "Acme Corp", "type": "ORGANIZATION", "notes": None},
                {"name": "Hello", "type": "concept", "notes": None},
                {"name": "Thank You", "type": "concept", "notes": None},
                {"name": "user", "type": "person", "notes": None},
                {"name": "Tuesday", "type": "date", "notes": None},
                {"name": "", "type": "person", "notes": None},
                {"name": 42, "type": "person"},
                "garbage",
            ],
            "relationships": [
                {"from": "alice", "to": "Acme Corp", "label": "Works At", "notes": "since 2020"},
                {"from": "Alice", "to": "Acme Corp", "label": "worksAt", "notes": None},
                {"from": "Alice", "to": "Tuesday", "label": "met on", "notes": None},
                {"from": "Hello", "to": "Alice", "label": "greets", "notes": None},
                {"from": "Alice", "to": "Alice", "label": "is", "notes": None},
                {"from": "Alice", "to": "Acme Corp", "label": "   ", "notes": None},
                {"to": "Acme Corp", "label": "x"},
            ],
        }
    )
    assert result.entities == [
        ExtractedEntity("Alice", "person", "engineer"),
        ExtractedEntity("Acme Corp", "organization", None),
    ]
    assert result.relationships == [
        ExtractedRelationship("Alice", "Acme Corp", "works_at", "since 2020"),
    ]


def test_extraction_same_name_different_type_kept() -> None:
    result = parse_extraction(
        {
            "entities": [
                {"name": "Python", "type": "technology", "notes": None},
                {"name": "Python", "type": "concept", "notes": None},
            ],
            "relationships": [],
        }
    )
    assert [(e.name, e.type) for e in result.entities] == [
        ("Python", "technology"),
        ("Python", "concept"),
    ]


@pytest.mark.parametrize(
    "obj",
    [{"entities": {}}, {"entities": [], "relationships": "none"}, {"other": 1}, ["x"]],
)
def test_extraction_bad_shape(obj: object) -> None:
    with pytest.raises(LLMBadOutput):
        parse_extraction(obj)  # type: ignore[arg-type]


def test_extraction_schema_shape() -> None:
    props = EXTRACTION_SCHEMA["properties"]
    assert set(props) == {"entities", "relationships", "ended"}
    assert set(props["relationships"]["items"]["properties"]) == {"from", "to", "label", "notes"}
    # Ended facts name the facts the prompt showed: their ends and label.
    assert set(props["ended"]["items"]["properties"]) == {"from", "to", "label"}
    assert set(EXTRACTION_SCHEMA["required"]) == {"entities", "relationships"}
