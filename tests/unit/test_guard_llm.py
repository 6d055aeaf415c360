"""Guards found by a mutation audit of the unit tier: rules of llm/tokens.py,
llm/openai_client.py and llm/client.py that no unit test held.

The rest are tests/unit/test_llm_tokens.py's and tests/unit/test_llm_*.py's."""

from __future__ import annotations

from nexus_grpc.llm import tokens


def test_any_text_at_all_is_at_least_one_accounted_token():
    """A reply of a byte or two would round to nothing: the call was made."""
    assert tokens.approximate_tokens("") == 0
    assert tokens.approximate_tokens("a") == 1
    assert tokens.approximate_tokens("ab") == 1


def test_a_context_too_small_for_the_answer_leaves_no_input_budget_not_a_negative_one():
    assert tokens.input_budget(4096, 1024, 96) == 2976
    assert tokens.input_budget(1000, 1024, 96) == 0
