"""NexusStore's own rules (integrations/langgraph.py, namespace_owners.py), without a
server: whose memories a namespace names, LangGraph's filter rule checked against its
own in-process InMemoryStore, and the item size the store refuses before a call.

(NexusStore writing and reading through a real server: tests/e2e/frameworks/test_langgraph.py.)"""

from __future__ import annotations

import json

import pytest
from langgraph.store.base import InvalidNamespaceError, PutOp
from langgraph.store.memory import InMemoryStore

from nexus_grpc.domain.validation import MAX_METADATA_BYTES
from nexus_grpc.integrations import langgraph
from nexus_grpc.integrations.langgraph import MAX_ITEM_BYTES
from nexus_grpc.integrations.namespace_owners import EVERY, NamespaceOwners

ALICE = ("memories", "alice")


# --- whose memories a namespace names -----------------------------------------------------


def test_both_common_layouts_name_their_user_and_one_label_the_project():
    auto = NamespaceOwners("auto")
    assert auto.of(("alice", "memories")) == "alice"
    assert auto.of(("memories", "carol")) == "carol"
    assert auto.of(("docs",)) is None and auto.of(()) is None


@pytest.mark.parametrize("namespace", [("prefs", "alice"), ("memories", "memories"),
                                       ("memories", "alice", "x")])  # fmt: skip
def test_a_namespace_whose_user_cannot_be_told_is_refused_with_the_setting_to_use(namespace):
    with pytest.raises(InvalidNamespaceError, match="Set user_position") as refused:
        NamespaceOwners("auto").of(namespace)
    assert '(user_id, "memories")' in str(refused.value), str(refused.value)
    assert NamespaceOwners("auto").placed(namespace) is EVERY


def test_the_setting_names_the_users_label_or_makes_everything_the_projects():
    first = NamespaceOwners(0)
    assert first.of(("alice", "prefs", "ui")) == "alice"
    assert NamespaceOwners(2).of(("a", "b")) is None  # too short to reach it: the project's
    assert NamespaceOwners(None).of(ALICE) is None
    for bad in ("first", -1, True, 1.0):
        with pytest.raises(ValueError, match="user_position must be"):
            NamespaceOwners(bad)  # type: ignore[arg-type]


def test_a_prefix_reaches_one_user_or_every_owner():
    auto = NamespaceOwners("auto")
    assert auto.reached_by(ALICE) == "alice"
    assert auto.reached_by(("bob", "memories", "deeper")) == "bob"
    assert auto.reached_by(("memories", "*")) is EVERY  # a wildcard names no user
    assert auto.reached_by(("memories",)) is EVERY
    assert NamespaceOwners(1).reached_by(("memories", "alice", "deeper")) == "alice"
    assert NamespaceOwners(1).reached_by(("memories",)) is EVERY
    assert NamespaceOwners(None).reached_by(("anything",)) is None


# --- LangGraph's filter rule --------------------------------------------------------------

ITEMS = {
    "a": {"colour": "red", "size": 3, "tags": ["x", "y"], "meta": {"v": 1, "w": 2}},
    "b": {"colour": "blue", "size": 5, "tags": ["x"], "meta": {"v": 2}},
    "c": {"colour": "red", "size": 8.5, "meta": {"v": 1}},
    "d": {"colour": "green", "size": 0},
}
FILTERS = [
    {"colour": "red"},
    {"colour": {"$ne": "red"}},
    {"size": {"$gt": 3}},
    {"size": {"$gte": 3, "$lt": 8.5}},
    {"size": {"$lte": 3}},
    {"size": {"$eq": 5}},
    {"tags": ["x", "y"]},
    {"meta": {"v": 1}},
    {"colour": "red", "size": {"$gt": 2}},
    {"missing": "nothing"},
]


def _ours(where: dict) -> set[str]:
    return {
        key
        for key, value in ITEMS.items()
        if all(langgraph._matches(value.get(k), wanted) for k, wanted in where.items())
    }


@pytest.mark.parametrize("where", FILTERS, ids=json.dumps)
def test_filters_apply_to_values_as_langgraphs_own_store_applies_them(where):
    theirs = InMemoryStore()
    for key, value in ITEMS.items():
        theirs.put(ALICE, key, value)
    assert _ours(where) == {i.key for i in theirs.search(ALICE, filter=where, limit=50)}


def test_a_comparison_with_a_key_the_value_lacks_is_false():
    # PostgreSQL's JSONB rule, which InMemoryStore means to follow (it raises TypeError).
    assert _ours({"absent": {"$gt": 1}}) == set()
    assert _ours({"colour": {"$gt": 1}}) == set()  # not a number: no order


def test_a_filter_with_an_unknown_operator_or_key_is_refused():
    with pytest.raises(ValueError, match=r"filter.size has unknown operator '\$between'"):
        langgraph._check_filter({"size": {"$between": [1, 2]}})
    with pytest.raises(ValueError, match="filter keys must be strings, got 1"):
        langgraph._check_filter({1: "x"})
    langgraph._check_filter({"meta": {"v": {"$lte": 1}}})  # every operator it has passes


# --- an item's size ----------------------------------------------------------------------


def test_a_value_over_the_size_limit_is_refused_in_the_stores_terms():
    assert MAX_ITEM_BYTES == MAX_METADATA_BYTES  # the server's limit, as the store says it
    # An item whose namespace, key and value take exactly the limit fits; a byte more not.
    overhead = len(json.dumps({"langgraph": {"namespace": list(ALICE), "key": "big",
                                             "value": json.dumps({"text": ""})}}))  # fmt: skip
    langgraph._check_size(PutOp(ALICE, "big", {"text": "x" * (MAX_ITEM_BYTES - overhead)}))
    too_big = {"text": "x" * (MAX_ITEM_BYTES - overhead + 1)}
    with pytest.raises(ValueError) as refused:
        langgraph._check_size(PutOp(ALICE, "big", too_big))
    message = str(refused.value)
    assert message.startswith("the value put at ('memories', 'alice') key 'big' is too large")
    assert (
        f"at most {MAX_ITEM_BYTES:,} bytes as JSON, and this item takes {MAX_ITEM_BYTES + 1:,}"
        in message
    )
    assert "memory.metadata" not in message
    # Escaped characters count as the server counts them (JSON's \\uXXXX).
    with pytest.raises(ValueError, match="too large"):
        langgraph._check_size(PutOp(ALICE, "wide", {"text": "ż" * (MAX_ITEM_BYTES // 6 + 1)}))
