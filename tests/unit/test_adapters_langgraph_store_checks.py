"""NexusStore (integrations/langgraph.py): a batch checked whole before any call, the
item a memory holds read back, the request id a put is deduplicated by, and which
namespaces a condition matches, on a client whose stubs fail any call they are asked
to make (so "refused before any call" is seen, not inferred from what was stored).

(Whose memories a namespace names, the filter rule and the size limit:
tests/unit/test_frameworks_langgraph_rules.py. The store through a real server:
tests/e2e/frameworks/test_langgraph.py.)"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf import json_format
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations import langgraph
from nexus_grpc.integrations.langgraph import NexusStore

ALICE = ("memories", "alice")


class NoCalls:
    """A service stub that records and fails every RPC asked of it."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __getattr__(self, rpc: str) -> Any:
        def method(*args: Any, **kwargs: Any) -> Any:
            self.asked.append(rpc)
            raise AssertionError(f"{rpc} was called")

        return method


@pytest.fixture
def stubs() -> dict[str, NoCalls]:
    return {name: NoCalls() for name in ("MemoryService", "GraphService", "SummaryService",
                                         "Health")}  # fmt: skip


@pytest.fixture
def store(stubs) -> NexusStore:
    client = NexusClient("127.0.0.1:1")
    client._stubs = stubs  # what stub() hands out: no channel is opened
    return NexusStore(client=client, project="p")


FINE = PutOp(ALICE, "fine", {"v": 1})


@pytest.mark.parametrize(
    ("op", "refusal", "says"),
    [
        (PutOp((), "k", {"v": 1}), InvalidNamespaceError, "must not be empty"),
        (PutOp(("langgraph", "x"), "k", {"v": 1}), InvalidNamespaceError, "is reserved"),
        (PutOp(("a.b", "alice"), "k", {"v": 1}), InvalidNamespaceError, "must not contain '.'"),
        (PutOp(("memories", ""), "k", {"v": 1}), InvalidNamespaceError, "must not be empty"),
        (PutOp(("memories", "a\nb"), "k", {"v": 1}), InvalidNamespaceError, "control characters"),
        (PutOp(["memories", "alice"], "k", {"v": 1}), InvalidNamespaceError,  # type: ignore[arg-type]
         "must be a tuple"),
        (PutOp(("memories", 7), "k", {"v": 1}), InvalidNamespaceError, "must be strings"),  # type: ignore[arg-type]
        (PutOp(ALICE, 3, {"v": 1}), ValueError, "a store key must be a string, got 3"),  # type: ignore[arg-type]
        (PutOp(ALICE, "k", ["v"]), ValueError, "a store value must be a mapping"),  # type: ignore[arg-type]
        (PutOp(ALICE, "k", {"when": object()}), ValueError, "must be JSON"),
        (PutOp(ALICE, "k", {"x": float("nan")}), ValueError, "must be JSON"),
        (PutOp(ALICE, "k", {"v": 1}, ttl=5.0), NotImplementedError, "does not support TTLs"),
        (GetOp(ALICE, 3), ValueError, "a store key must be a string"),  # type: ignore[arg-type]
        (SearchOp(ALICE, filter={"v": {"$regex": "x"}}), ValueError, "unknown operator"),
        (SearchOp(ALICE, query="x", limit=90, offset=20), ValueError,
         "a query search reaches at most 100 ranked items; offset + limit is 110"),
        (SearchOp(ALICE, limit=-1), ValueError, "must not be negative"),
        (ListNamespacesOp(offset=-1), ValueError, "must not be negative"),
        ("put", ValueError, "unknown store operation 'put'"),
    ],
)  # fmt: skip
async def test_a_batch_with_one_bad_op_is_refused_whole_before_any_call(
    store, stubs, op, refusal, says
):
    with pytest.raises(refusal, match=re.escape(says)):
        await store.abatch([FINE, op])
    assert all(stub.asked == [] for stub in stubs.values())


async def test_a_query_reaching_exactly_the_ranked_limit_and_a_plain_listing_pass_the_checks(
    store,
):
    ops = [SearchOp(ALICE, query="x", limit=80, offset=20), SearchOp(ALICE, limit=500)]
    assert store._checked(ops) == ops


def test_the_agent_and_the_connection_are_checked_when_the_store_is_made():
    client = NexusClient("127.0.0.1:1")
    with pytest.raises(ValueError, match="agent_id must not start or end with whitespace"):
        NexusStore(client=client, project="p", agent_id=" bot")
    with pytest.raises(ValueError, match="pass either client= .* or target="):
        NexusStore(project="p")


# --- what a memory holds ---------------------------------------------------------------


def stored_memory(entry: Any, *, updated: bool = True) -> memory_pb2.Memory:
    memory = memory_pb2.Memory(id=12)
    if entry is not None:
        json_format.ParseDict({"langgraph": entry}, memory.metadata)
    memory.create_time.FromSeconds(1_765_065_600)
    if updated:
        memory.update_time.FromSeconds(1_765_069_200)
    return memory


def test_a_memory_the_store_wrote_reads_back_as_its_item():
    value = {"b": 1, "a": [1.0, "x"]}
    entry = langgraph._entry(ALICE, "k", value, False)
    assert entry == {"namespace": ["memories", "alice"], "key": "k", "value": json.dumps(value),
                     "index": False}  # fmt: skip
    held = langgraph._decode(stored_memory(entry))
    assert held is not None
    assert (held.memory_id, held.namespace, held.key, held.indexed) == (12, ALICE, "k", False)
    assert json.dumps(held.value) == json.dumps(value)  # key order and 1.0 kept
    assert held.created_at == datetime(2025, 12, 7, tzinfo=UTC)
    assert held.updated_at == datetime(2025, 12, 7, 1, tzinfo=UTC)
    item = held.item()
    assert (item.namespace, item.key, item.value) == (ALICE, "k", value)
    assert held.search_item(0.5).score == 0.5
    # Never updated: its update time is its creation.
    fresh = langgraph._decode(
        stored_memory(langgraph._entry(ALICE, "k", value, None), updated=False)
    )
    assert fresh is not None and fresh.updated_at == fresh.created_at and fresh.indexed


@pytest.mark.parametrize(
    "entry",
    [
        None,  # no langgraph entry: a memory someone else wrote
        "a string",
        {"namespace": ["memories"], "key": "k"},  # no value
        {"namespace": ["memories"], "key": "k", "value": "not json"},
        {"namespace": ["memories"], "key": "k", "value": "[1, 2]"},  # JSON, not an object
    ],
)
def test_a_memory_the_store_did_not_write_holds_no_item(entry):
    assert langgraph._decode(stored_memory(entry)) is None


def test_a_puts_request_id_is_a_function_of_where_it_writes(store):
    rid = store._request_id(1, "alice", ALICE, "k")
    assert rid.startswith("langgraph-") and len(rid) == len("langgraph-") + 40
    assert store._request_id(1, "alice", ALICE, "k") == rid
    others = {
        store._request_id(2, "alice", ALICE, "k"),
        store._request_id(1, "bob", ALICE, "k"),
        store._request_id(1, None, ALICE, "k"),
        store._request_id(1, "alice", ("memories", "alice", "x"), "k"),
        store._request_id(1, "alice", ALICE, "k2"),
    }
    assert rid not in others and len(others) == 5
    store.agent_id = "bot"
    assert store._request_id(1, "alice", ALICE, "k") != rid


def test_a_namespace_condition_matches_by_prefix_or_suffix_with_wildcards():
    namespace = ("memories", "alice", "prefs")
    matches = langgraph._namespace_matches
    assert matches(namespace, MatchCondition("prefix", ("memories", "*")))
    assert not matches(namespace, MatchCondition("prefix", ("prefs",)))
    assert matches(namespace, MatchCondition("suffix", ("*", "prefs")))
    assert not matches(namespace, MatchCondition("suffix", ("memories",)))
    assert not matches(("memories",), MatchCondition("prefix", ("memories", "alice")))


def test_a_scope_reads_the_owner_the_namespace_names_archived_included(store):
    assert store._scope(3, "alice") == memory_pb2.MemoryScope(
        project_id=3, user_id="alice", include_archived=True
    )
    assert store._scope(3, None).user_id == ""
    assert store._kind("alice") == memory_pb2.MEMORY_KIND_USER
    assert store._kind(None) == memory_pb2.MEMORY_KIND_PROJECT
