"""What every adapter checks and shapes alike (integrations/adapter_client.py and
search_results.py), without a framework or a server: the names and ids the server
would refuse, a search's kind, mode and size, and how a hit's text and metadata read.

(The adapters refusing bad settings before any call, against a real server:
tests/e2e/frameworks/test_llamaindex.py and test_langchain.py.)"""

from __future__ import annotations

import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations.adapter_client import check_label, one_line
from nexus_grpc.integrations.search_results import check_search, episode_text, memory_fields


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("", "user_id must not be blank"),
        ("  ", "user_id must not be blank"),
        ("a\nb", "user_id must not contain control characters: 'a\\nb'"),
        (" alice", "user_id must not start or end with whitespace: ' alice'"),
        ("x" * 201, "user_id is 201 characters; the limit is 200"),
        (7, "user_id must be a string, got int"),
    ],
)
def test_a_label_the_server_would_refuse_is_refused_naming_it(value, says):
    with pytest.raises(ValueError) as refused:
        check_label("user_id", value)
    assert str(refused.value) == says


def test_an_optional_label_may_be_empty_and_a_good_one_passes():
    assert check_label("agent_id", "", required=False) == ""
    assert check_label("user_id", "x" * 200) == "x" * 200
    with pytest.raises(ValueError, match="whitespace"):
        check_label("agent_id", "bot ", required=False)


def test_a_title_is_one_line():
    assert one_line("  Deploys\tgo\n\nout \x07 blue-green ") == "Deploys go out blue-green"


@pytest.mark.parametrize(
    ("kind", "mode", "k", "says"),
    [
        ("chats", "hybrid", 5, "kind must be one of episodes, memories, entities; got 'chats'"),
        ("memories", "vector", 5, "mode must be one of hybrid, keyword, semantic; got 'vector'"),
        ("memories", "hybrid", 0, "k must be an integer from 1 to 100; got 0"),
        ("memories", "hybrid", 101, "k must be an integer from 1 to 100; got 101"),
        ("memories", "hybrid", True, "k must be an integer from 1 to 100; got True"),
        ("memories", "hybrid", 2.0, "k must be an integer from 1 to 100; got 2.0"),
    ],
)
def test_a_search_the_server_would_refuse_is_refused_before_any_call(kind, mode, k, says):
    with pytest.raises(ValueError) as refused:
        check_search(kind, mode, k)
    assert str(refused.value) == says


def test_every_kind_and_mode_and_the_bounds_pass():
    for kind in ("episodes", "memories", "entities"):
        for mode in ("hybrid", "keyword", "semantic"):
            check_search(kind, mode, 1)
    check_search("episodes", "hybrid", 100)


def test_a_hits_text_and_a_memorys_metadata():
    assert episode_text("Where?", "Port 5433.") == "User: Where?\nAssistant: Port 5433."
    assert episode_text("Hello?", "") == "User: Hello?"
    memory = memory_pb2.Memory(
        title="t", kind=memory_pb2.MEMORY_KIND_USER, tier=memory_pb2.TIER_LONGTERM,
        project_id=3, user_id="alice", session_id=9,
    )  # fmt: skip
    memory.create_time.FromSeconds(1_765_065_600)
    assert memory_fields(memory) == {
        "title": "t",
        "memory_kind": "user",
        "tier": "longterm",
        "project_id": 3,
        "user_id": "alice",
        "agent_id": "",
        "session_id": 9,
        "create_time": "2025-12-07T00:00:00+00:00",
        "update_time": None,
    }
