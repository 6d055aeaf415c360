"""The summary and overview prompts (llm/summary_prompts.py): a session's
summary new or carried forward, an overview of the most recent 8,000
characters of its sources, and the options they are asked with.

A summary asked of a served model is tested against the Ollama stand-in in
tests/integration/llm/test_llm.py; what SummaryService does with it in
tests/unit/test_summary_rules.py and tests/e2e/service/test_summaries.py."""

from __future__ import annotations

from nexus_grpc.llm.summary_prompts import (
    MAX_OVERVIEW_INPUT_CHARS,
    SESSION_SUMMARY_OPTIONS,
    build_project_overview_messages,
    build_session_summary_messages,
    truncate_recent,
)


def test_truncate_recent() -> None:
    assert truncate_recent("abcdef", 3) == "def"
    assert truncate_recent("abc", 3) == "abc"
    assert truncate_recent("abc", 0) == ""


def test_overview_keeps_most_recent_8000_chars() -> None:
    old = "OLD" * 4000  # 12,000 chars, all older than the last source
    recent = "R" * 7000 + "NEWEST"
    msgs = build_project_overview_messages("Nexus", [old, recent], from_summaries=True)
    prompt = msgs[-1]["content"]
    joined = old + "\n\n---\n\n" + recent
    assert joined[-MAX_OVERVIEW_INPUT_CHARS:] in prompt
    assert joined[: len(joined) - MAX_OVERVIEW_INPUT_CHARS] not in prompt
    assert prompt.count("OLD") < 1000 and "NEWEST" in prompt
    assert "Nexus" in prompt and "Session summaries" in prompt


def test_an_overview_without_summaries_reads_conversation_excerpts() -> None:
    fallback = build_project_overview_messages("Nexus", ["ep"], from_summaries=False)
    assert "Conversation excerpts" in fallback[-1]["content"]


def test_session_summary_new_and_cumulative() -> None:
    fresh = build_session_summary_messages([("Q1", "A1"), ("Q2", "A2")], None)[-1]["content"]
    assert "Q1" in fresh and "A2" in fresh and "Current summary" not in fresh
    update = build_session_summary_messages([("Q3", "A3")], "Earlier: Q1/Q2.")[-1]["content"]
    assert "Earlier: Q1/Q2." in update and "Q3" in update and "A3" in update
    assert SESSION_SUMMARY_OPTIONS == {"temperature": 0.2, "num_predict": 500}
