"""The selection and ranking prompts and what is kept of their answers
(llm/selection_prompts.py): candidates listed by id, those already used in
the thread marked; ids the model invented dropped, relevance clamped to
[0, 1], one pick per id, and an answer of the wrong shape refused.

What the selection does with a served model's answer is tested through the
server in tests/e2e/service/test_selection.py."""

from __future__ import annotations

import pytest

from nexus_grpc.llm import LLMBadOutput
from nexus_grpc.llm.selection_prompts import (
    RANKING_SCHEMA,
    SELECTION_SCHEMA,
    Selected,
    build_ranking_messages,
    build_selection_messages,
    parse_ranking,
    parse_selection,
)


def test_selection_prompt() -> None:
    msgs = build_selection_messages(
        "How do I deploy?", [(1, "Deploy notes"), (2, "Cats")], None, {2}
    )
    prompt = msgs[-1]["content"]
    assert "How do I deploy?" in prompt and "[1] Deploy notes" in prompt
    assert "[2] Cats  (already used in this thread)" in prompt
    assert "[1] Deploy notes  (already" not in prompt


def test_ranking_prompt() -> None:
    ranking = build_ranking_messages("q", [(7, "T", "body text")], "thread so far")
    assert "[7] T\nbody text" in ranking[-1]["content"]
    assert "thread so far" in ranking[-1]["content"]


def test_parse_selection_drops_invented_ids_and_clamps() -> None:
    picks = parse_selection(
        {
            "selected": [
                {"id": 1, "relevance": 1.7, "category": "necessary"},
                {"id": 99, "relevance": 0.9, "category": "necessary"},  # invented
                {"id": "2", "relevance": -0.5, "category": "Supporting"},
                {"id": 3, "relevance": 0.4, "category": "weird"},
                {"id": 3, "relevance": 0.6, "category": "necessary"},
                {"id": True, "relevance": 0.5, "category": "necessary"},
                {"id": 4, "relevance": "high", "category": "necessary"},
                {"relevance": 0.5},
            ]
        },
        valid_ids={1, 2, 3, 4},
    )
    assert picks == [
        Selected(1, 1.0, "necessary"),
        Selected(3, 0.6, "necessary"),
        Selected(2, 0.0, "supporting"),
    ]


def test_parse_ranking() -> None:
    ranked = parse_ranking(
        {
            "ranked": [
                {"id": 5, "relevance": 0.2},
                {"id": 6, "relevance": 3},
                {"id": 8, "relevance": 1},
            ]
        },
        valid_ids=[5, 6],
    )
    assert ranked == {6: 1.0, 5: 0.2}
    assert list(ranked) == [6, 5]


def test_an_answer_without_its_list_is_bad_output() -> None:
    with pytest.raises(LLMBadOutput):
        parse_ranking({"ranked": "nope"}, valid_ids=[5])
    with pytest.raises(LLMBadOutput):
        parse_selection({}, valid_ids=[5])


def test_the_schemas_require_their_lists() -> None:
    assert SELECTION_SCHEMA["required"] == ["selected"] and RANKING_SCHEMA["required"] == ["ranked"]
