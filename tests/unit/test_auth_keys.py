"""The key file and the key a call presents (rpc/auth.py): what a key file
may hold, what the ring keeps of it, how a bearer key is read off the
metadata, and which user ids a request names.

Moved from the whole-server tier (tests/e2e/api/test_auth.py and a file of
the key file's tenants), where they ran beside a server they never called; what the interceptor
decides of a call is in tests/unit/test_auth_interceptor.py, and the wiring
(every RPC behind the check, over the wire) stays in tests/e2e/api/test_auth.py.
The keys, the key file and the walk that sets a request's user ids are one copy
in tests/auth_walk.py, which both files import.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.rpc.auth import KeyFileError, KeyRing, Principal, bearer_key, request_user_ids
from tests.auth_walk import (
    ADMIN_KEY,
    ALICE_KEY,
    ANY_KEY,
    KEY_FILE,
    OUTSIDER,
    has_user,
    request_for,
)

# --- the key ring -------------------------------------------------------------------


def test_key_ring_keeps_digests_only_and_names_each_keys_principal():
    ring = KeyRing.from_dict(KEY_FILE)
    assert ALICE_KEY not in repr(vars(ring))
    assert ring.lookup(ALICE_KEY) == Principal("orchestrator", frozenset({"alice", "bob"}))
    assert ring.lookup(ADMIN_KEY).admin
    assert ring.lookup(ANY_KEY).may_act_for("anyone")
    # The tenant defaults to the key's name; several keys may share one.
    assert ring.lookup(ALICE_KEY).tenant == "orchestrator"
    assert ring.lookup(ANY_KEY).tenant == ring.lookup(ADMIN_KEY).tenant == "ops"
    assert ring.lookup("nope") is None
    # Each key is counted as itself: its place in the file, not its name.
    assert ring.lookup(ALICE_KEY).key_id != ring.lookup(ADMIN_KEY).key_id


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"keys": []},
        {"keys": [{"key": "short", "name": "x"}]},
        {"keys": [{"key": ALICE_KEY}]},
        {"keys": [{"key": ALICE_KEY, "name": "x", "users": "alice"}]},
        {"keys": [{"key": ALICE_KEY, "name": "x", "key_sha256": "00" * 32}]},
        {"keys": [{"key": ALICE_KEY, "name": "a"}, {"key": ALICE_KEY, "name": "b"}]},
        {"keys": [{"key_sha256": "abc", "name": "x"}]},
        {"keys": [{"key": ALICE_KEY, "name": "x", "tenant": ""}]},
        {"keys": [{"key": ALICE_KEY, "name": "x", "tenant": "two words"}]},
        {"keys": [{"key": ALICE_KEY, "name": "x", "tenant": 7}]},
    ],
)
def test_a_bad_key_file_is_refused(data):
    with pytest.raises(KeyFileError):
        KeyRing.from_dict(data)


def test_two_keys_under_one_name_are_refused_whatever_their_tenants():
    """Logs and per-key limits could not tell them apart (the probe's two
    "gw" keys shared one watch bucket)."""
    data = {
        "keys": [
            {"key": ALICE_KEY, "name": "gw", "tenant": "t1"},
            {"key": ADMIN_KEY, "name": "gw", "tenant": "t2"},
        ]
    }
    with pytest.raises(KeyFileError, match=r"keys\[1\]: name 'gw' is already the name of"):
        KeyRing.from_dict(data)


def test_a_key_file_that_cannot_be_read_is_refused(tmp_path):
    with pytest.raises(KeyFileError):
        KeyRing.from_file(tmp_path / "missing.json")


# --- the key file's "tenants" object (moved as it was from test_key_file_tenants.py) ----

KEYS = [{"key": "a-long-enough-key-0001", "name": "a"}]


def test_tenants_name_their_budgets_and_zero_is_none():
    ring = KeyRing.from_dict(
        {
            "tenants": {
                "acme": {"llm_tokens_per_day": 2_000_000},
                "free": {"llm_tokens_per_day": 0},
                "quiet": {},
            },
            "keys": KEYS,
        }  # fmt: skip
    )
    assert ring.tenant_budgets == {"acme": 2_000_000, "free": 0}
    assert ring.user_budgets == {}
    assert KeyRing.from_dict({"keys": KEYS}).tenant_budgets == {}


def test_a_tenant_names_the_most_one_users_work_may_spend_a_day():
    ring = KeyRing.from_dict(
        {
            "tenants": {
                "acme": {"llm_tokens_per_day": 2_000_000, "llm_tokens_per_day_per_user": 200_000},
                "open": {"llm_tokens_per_day_per_user": 0},
            },
            "keys": KEYS,
        }  # fmt: skip
    )
    assert ring.user_budgets == {"acme": 200_000, "open": 0}
    assert ring.tenant_budgets == {"acme": 2_000_000}


@pytest.mark.parametrize(
    ("tenants", "words"),
    [
        ([], '"tenants" must be an object'),
        ({"two words": {}}, "tenants['two words']: a tenant is 1 to 128"),
        ({"x" * 129: {}}, "a tenant is 1 to 128 printable characters"),
        ({"acme": 5}, "tenants['acme']: expected an object"),
        ({"acme": {"llm_token_per_day": 5}}, "unknown setting 'llm_token_per_day'"),
        ({"acme": {"llm_tokens_per_day": -1}}, "'llm_tokens_per_day' must be a whole number"),
        ({"acme": {"llm_tokens_per_day": 1.5}}, "'llm_tokens_per_day' must be a whole number"),
        ({"acme": {"llm_tokens_per_day": True}}, "'llm_tokens_per_day' must be a whole number"),
        ({"acme": {"llm_tokens_per_day": "100"}}, "'llm_tokens_per_day' must be a whole number"),
        (
            {"acme": {"llm_tokens_per_day_per_user": -5}},
            "'llm_tokens_per_day_per_user' must be a whole number of tokens, 0 or more"
            " (0: no limit per user)",
        ),
        (
            {"acme": {"llm_tokens_per_user": 5}},
            "unknown setting 'llm_tokens_per_user'; a tenant may set llm_tokens_per_day,"
            " llm_tokens_per_day_per_user",
        ),
    ],
)
def test_a_malformed_tenant_entry_is_refused(tenants, words):
    with pytest.raises(KeyFileError) as refused:
        KeyRing.from_dict({"tenants": tenants, "keys": KEYS}, source="keys.json")
    assert words in str(refused.value)
    assert str(refused.value).startswith("keys.json: ")


# --- the key a call presents ------------------------------------------------------------


def test_bearer_key_parsing():
    assert bearer_key((("authorization", "Bearer abc"),)) == "abc"
    assert bearer_key((("authorization", "bearer  abc "),)) == "abc"
    assert bearer_key((("authorization", "Basic abc"),)) is None
    assert bearer_key((("x-other", "Bearer abc"),)) is None
    assert bearer_key(None) is None


@pytest.mark.parametrize(
    "metadata",
    [
        (("authorization", ALICE_KEY),),  # no scheme
        (("authorization", f"Basic {ALICE_KEY}"),),
        (("authorization", "Bearer "),),
    ],
)
def test_a_malformed_authorization_presents_no_key(metadata):
    """The malformed headers tests/e2e/api/test_auth.py sent to every method:
    each reads as no key at all (the interceptor answers UNAUTHENTICATED)."""
    assert bearer_key(metadata) is None


# --- the user ids of a request ----------------------------------------------------------

SERVICES = [
    memory_pb2.DESCRIPTOR.services_by_name["MemoryService"],
    graph_pb2.DESCRIPTOR.services_by_name["GraphService"],
    summary_pb2.DESCRIPTOR.services_by_name["SummaryService"],
]
METHODS = [method for service in SERVICES for method in service.methods]


def test_the_walk_finds_the_user_scoped_rpcs():
    user_methods = [m for m in METHODS if has_user(m.input_type)]
    names = {m.name for m in user_methods}
    assert {
        "CreateMemory",
        "GetMemory",
        "ListMemories",
        "UpdateMemory",
        "DeleteMemory",
        "SearchMemories",
        "SelectMemories",
        "ListMemoryUsage",
        "ListMemoryHistory",
    } <= names
    # Every user_id the walk sets is one the server's check sees.
    for method in user_methods:
        request = request_for(method, OUTSIDER)
        assert set(request_user_ids(request)) == {OUTSIDER}, method.name


def test_a_key_file_is_read_from_its_path(tmp_path: Path):
    """from_file reads the same ring from_dict builds (the file is the function's input)."""
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(KEY_FILE))
    ring = KeyRing.from_file(path)
    assert ring.lookup(ALICE_KEY) == KeyRing.from_dict(KEY_FILE).lookup(ALICE_KEY)
