"""Guards found by a mutation audit of the unit tier: rules of the agent
hooks (agent_hooks/context.py, agent_hooks/recall.py, agent_hooks/capture.py,
agent_hooks/project_cache.py) that no unit test held.

The rest are tests/unit/test_hooks_*.py's."""

from __future__ import annotations

import json

from nexus_grpc.agent_hooks import capture
from nexus_grpc.agent_hooks.context import _fill, estimate_tokens
from nexus_grpc.agent_hooks.project_cache import ProjectCache


def test_an_item_that_fills_the_budget_exactly_is_taken():
    item = "the staging database listens on port 5433"
    cost = estimate_tokens(item) + 1  # its line's own break
    assert _fill([item], cost, 0) == ([item], cost)
    assert _fill([item], cost - 1, 0) == ([], 0)


def test_a_message_one_character_past_the_limit_is_cut_to_the_limit_with_a_note():
    assert capture._cut("x" * capture.MAX_MESSAGE_CHARS) == "x" * capture.MAX_MESSAGE_CHARS
    cut = capture._cut("x" * (capture.MAX_MESSAGE_CHARS + 1))
    assert len(cut) == capture.MAX_MESSAGE_CHARS
    assert cut.endswith(f"characters cut by {capture.SOURCE}]")


def test_a_remembered_id_that_is_not_a_positive_whole_number_is_not_used(tmp_path):
    """The cache is a file a person may edit: a 0, negative or text id reads
    as not remembered (the next run looks the project up again)."""
    path = tmp_path / "projects.json"
    path.write_text(json.dumps({"t|-|zero": 0, "t|-|neg": -3, "t|-|text": "7", "t|-|ok": 7}))
    cache = ProjectCache(path, target="t", api_key="")
    assert [cache.get(name) for name in ("zero", "neg", "text", "ok")] == [None, None, None, 7]
