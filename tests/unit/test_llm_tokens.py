"""Token arithmetic (llm/tokens.py): a long text split into parts that each
fit a budget, and the context window a request asks for.

The estimate's upper bound against the tokenizers we ship or run, and what a
served model does with a prompt over its window or an answer over its limit,
are tested against the Ollama stand-in in tests/integration/llm/test_llm_budget.py."""

from __future__ import annotations

from nexus_grpc.llm import tokens


def test_split_to_budget_keeps_every_character_and_each_part_fits() -> None:
    text = ("Alice works at Acme on the Nexus project. " * 40 + "\n\n") * 5
    parts = tokens.split_to_budget(text, 500)
    assert len(parts) > 1
    assert "".join(parts) == text
    assert all(tokens.estimate_tokens(p) <= 500 for p in parts)
    # Cut at sentence ends, not mid-word.
    assert all(p.endswith((". ", "\n")) for p in parts[:-1])


def test_num_ctx_steps_and_limit() -> None:
    assert tokens.num_ctx_for(100, 500, 32768) == 2048
    assert tokens.num_ctx_for(3000, 1500, 32768) == 8192
    assert tokens.num_ctx_for(30000, 1500, 32768) == 32768
