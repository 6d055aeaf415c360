"""Random requests for every RPC of every service, over a real channel.

The RPC list is walked from the generated descriptors in ``nexus_grpc/gen``
(every ``*_pb2`` module, every service in it), and each request message is
built from its descriptor, field by field, so an RPC or a field added
tomorrow is fuzzed without touching this file.  Values are biased towards
what breaks servers: 0, negative and huge integers, empty, blank, unicode,
NUL-bearing, over-long and FTS5-syntax strings, unknown enum numbers, NaN
and infinities in metadata, bogus field-mask paths and page tokens, and
(often) ids of rows that exist, drawn from the database before each call so
calls reach past validation into the domain and the store.

Each call must:

- end with a status other than INTERNAL or UNKNOWN (nor UNIMPLEMENTED,
  DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED: none has a reason to occur here),
  with a message when it is not OK, and UNAVAILABLE only when the model was
  asked and failed;
- leave the database exactly as it was when it fails, and when it only
  reads (Get/List/Search/Watch): a digest of every table, FTS shadow tables
  and ``sqlite_sequence`` included, is taken before and after through a
  separate read-only connection (the server's group commit is durable
  before an RPC returns, so the after-read sees every write); on
  PostgreSQL, of every table (the pgvector ones too), read in one snapshot;
- answer INVALID_ARGUMENT when the request is wrong on its face (a negative
  size or id, an unknown enum number, a NUL in a string, a non-finite number
  in metadata, a mask path the resource does not have), NOT_FOUND to a Get
  or Delete of an id no row ever had, and never OK to a call naming a row
  that never existed (List filters aside);
- answer a Get with the row asked for and an Update with the masked
  fields as sent;
- return no more rows than ``limit`` or ``page_size`` allow, a
  ``next_page_token`` that leads to a page repeating none of its rows, and,
  from a watch, only stored events that match its filter and cursor;
- log no unexpected server error (the interceptor logs one before it
  answers INTERNAL, also for streams the client already cancelled) and
  leave no unretrieved task exception on the loop.

Streams are read to the end, or hung up on after one or two messages (a
watch, which never ends, after the few stored events it must replay).  Each
call is over only when the server's access log has its line, so nothing of
it is still running when the next one starts.

The background workers are stopped once the seed data is extracted and
indexed: a worker committing between the two digests would be
indistinguishable from a partial write.  The pipeline has its own tests;
this one is about what an RPC writes.  The Ollama stand-in answers the LLM
methods (SelectMemories, SummarizeSession, SummarizeProject) well, with
errors, with garbage or with nothing, as each example draws.

Everything runs on SQLite and then on PostgreSQL (tests/pg.py). The quick
test runs ``QUICK_EXAMPLES`` examples per RPC on SQLite and
``QUICK_EXAMPLES_PG`` on PostgreSQL; the ``slow`` one (``make soak``) many
more on both, and more again with ``NEXUS_SOAK=1``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import importlib
import logging
import math
import os
import pkgutil
import random
import re
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import grpc.aio
import pytest
from google.protobuf import text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from hypothesis import HealthCheck, given, note, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st

import nexus_grpc.gen
from nexus_grpc.domain.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, encode_token
from nexus_grpc.domain.validation import CONTROL_CHARS, DEFAULT_SEARCH_LIMIT, MAX_ID_CHARS
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.llm.extraction_prompts import ENTITY_TYPES
from nexus_grpc.server import SERVICE_NAMES
from tests.ollama_stub import OllamaStub, RecordedRequest, Reply
from tests.support import Harness, start_harness, wait_until

SOAK = os.environ.get("NEXUS_SOAK") == "1"
# make test's share: every RPC and field, 50 draws each (100 until make test had
# to fit 6 minutes: 40 s of its CPU went here, half of it hypothesis drawing
# strings; docs/testing.md). Depth is make soak's: 300 draws on both stores.
QUICK_EXAMPLES = int(os.environ.get("NEXUS_FUZZ_EXAMPLES", "50"))
# On PostgreSQL (each example's digest reads every table again): fewer.
QUICK_EXAMPLES_PG = int(os.environ.get("NEXUS_FUZZ_EXAMPLES_PG", "20"))
SLOW_EXAMPLES = 2000 if SOAK else 300
# Every call is answered at once; a call still running after this is a hang.
CALL_TIMEOUT = 20.0
# A watch that matched no stored event is given this long to fail before the
# client cancels it (a valid one stays open, waiting for live events).
WATCH_IDLE = 0.2
WATCH_TAKE = 3
# The stream that never ends by itself (WatchErasure ends once its erasure is done).
EVENT_WATCH = "WatchExtractions"

OK = grpc.StatusCode.OK
INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
# What a well-behaved server may answer an arbitrary request with.
ALLOWED = {
    OK,
    INVALID,
    NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNAVAILABLE,
}


# The walk --------------------------------------------------------------------


def walk_services() -> list:
    """Every service of every generated ``*_pb2`` module."""
    services = []
    for info in pkgutil.walk_packages(nexus_grpc.gen.__path__, "nexus_grpc.gen."):
        if not info.name.endswith("_pb2"):
            continue
        module = importlib.import_module(info.name)
        services += list(module.DESCRIPTOR.services_by_name.values())
    return sorted(services, key=lambda d: d.full_name)


SERVICES = walk_services()
METHODS: list[MethodDescriptor] = [meth for svc in SERVICES for meth in svc.methods]


def _served_methods(target: str) -> set[str]:
    """Every method of the server's own services, as its reflection lists them."""
    with grpc.insecure_channel(target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        pool = DescriptorPool(database)
        names = [
            n for n in database.get_services() if not n.startswith(("grpc.health.", "grpc.refl"))
        ]
        return {meth.full_name for name in names for meth in pool.FindServiceByName(name).methods}


def test_the_walk_finds_every_rpc_the_server_serves(world):
    # Blocking reflection calls in a thread, while the loop serves them.
    served = world.run(asyncio.to_thread(_served_methods, world.h.target))
    walked = {meth.full_name for meth in METHODS}
    assert walked == served
    assert {svc.full_name for svc in SERVICES} == set(SERVICE_NAMES)
    assert len(walked) >= 45


# Values ------------------------------------------------------------------------

INT64_EDGES = [0, 1, -1, 2, 7, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, -(2**63)]
INT32_EDGES = [0, 1, 2, 3, 4, -1, -2, 10, 50, 99, 100, 101, 999, 1000, 1001, 2**31 - 1, -(2**31)]
FLOAT_EDGES = [0.0, -0.0, 0.5, 1.0, 1.0000001, -0.1, 2.0, math.nan, math.inf, -math.inf, 1e308]
FTS_SYNTAX = [
    '"a" OR b*', "NEAR(alpha beta)", 'NEAR("a" "b", 2)', "alpha AND", "OR", "(", ")", '"',
    "*", "a:*", "user_message:hi", "title:x", "^alpha", "alpha NOT beta", "-alpha", "+", "{a b}",
    "AND OR NOT", "''", "\\", "%", "_", "'; DROP TABLE episodes; --", "a\"b", "port*",
]  # fmt: skip
WORDS = ["postgres", "port", "deploy", "docker", "atlas", "alice", "backup", "the", "and", "of"]
WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u200b", "\ufeff"]
ODD = [
    "a\x00b", "\x00", "ünïcödé", "日本語のテキスト", "🦀🦀", "مرحبا", "e\u0301", "\x01\x7f",
    "\ud7ff", "\U0010ffff", "<|im_start|>system", "NULL", "0", "-1", "1e309", "None",
]  # fmt: skip
LENGTH_EDGES = [199, 200, 201, 499, 500, 501, 1999, 2000, 2001, 9999, 10_000, 10_001, 100_001]
USERS = ["alice", "bob", "carol"]
AGENTS = ["agent-1", "agent-2"]
THREADS = ["t1", "t2"]
REQUEST_IDS = ["r1", "r2", "r3"]
BAD_IDENTIFIERS = ["", " alice", "alice ", "ALICE", "al\x00ice", "x" * 201, " "]
ENTITY_NAMES = ["Alice", "alice", "Atlas", "Postgres", " Atlas ", "Zed"]
LABELS = ["leads", "works_on", "Works On", "USES", "!!!", "a-b", "_", "ünï"]
MASK_JUNK = [
    "", "id", "create_time", "nope", "metadata.key", "name,description", "NAME", " name", "name ",
    "*", "project.name", "memory.title", "update_mask", "name.first", "\x00",
]  # fmt: skip

INT64_TYPES = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_SFIXED64,
}
INT32_TYPES = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SFIXED32,
}
UINT_TYPES = {
    FieldDescriptor.TYPE_UINT32: 2**32 - 1,
    FieldDescriptor.TYPE_FIXED32: 2**32 - 1,
    FieldDescriptor.TYPE_UINT64: 2**64 - 1,
    FieldDescriptor.TYPE_FIXED64: 2**64 - 1,
}

# Fields that name a row, and the table it lives in.
ID_FIELDS = {
    "project_id": "projects",
    "session_id": "sessions",
    "episode_id": "episodes",
    "first_episode_id": "episodes",
    "last_episode_id": "episodes",
    "memory_id": "memories",
    "entity_id": "entities",
    "entity_ids": "entities",
    "from_id": "entities",
    "to_id": "entities",
    "after_event_id": "extraction_events",
}
RESOURCES = (
    ("Project", "projects"),
    ("Session", "sessions"),
    ("Episode", "episodes"),
    ("Memory", "memories"),
    ("Entity", "entities"),
    ("Relationship", "relationships"),
    ("Summary", "summaries"),
)


def id_table(f: FieldDescriptor) -> str | None:
    if f.name in ID_FIELDS:
        return ID_FIELDS[f.name]
    if f.name == "id":
        for word, table in RESOURCES:
            if word in f.containing_type.name:
                return table
    return None


def is_id_like(f: FieldDescriptor) -> bool:
    return f.type in INT64_TYPES and (f.name == "id" or f.name.endswith(("_id", "_ids")))


@dataclass
class Pools:
    """What exists right now, read from the database before each example."""

    ids: dict[str, list[int]] = field(default_factory=dict)
    # The rows with something under them (sessions with episodes, projects
    # with such sessions, entities with edges): deep paths need those.
    rich: dict[str, list[int]] = field(default_factory=dict)
    # The highest id each AUTOINCREMENT table ever handed out: above it, no
    # row has ever existed.
    high: dict[str, int] = field(default_factory=dict)
    external_ids: list[str] = field(default_factory=list)
    entity_names: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    request_ids: list[str] = field(default_factory=list)
    # Drawn per example: values a careful client would send (so calls reach
    # the store and succeed), instead of the whole hostile range.
    tame: bool = False


def _from(values: list, default):
    """One of ``values`` (read from the database), or ``default`` when none.

    The draw itself is an index, not ``sampled_from(values)``: what exists
    changes between examples, and hypothesis needs every example's choices
    to have the same shape.
    """
    return st.integers(0, 1 << 16).map(lambda k: values[k % len(values)] if values else default)


def _tame_strings(pools: Pools, f: FieldDescriptor) -> st.SearchStrategy[str]:
    name = f.name
    if name == "user_id":
        return st.sampled_from(["", *USERS])
    if name == "agent_id":
        return st.sampled_from(["", *AGENTS])
    if name == "thread_id":
        return st.sampled_from(THREADS)
    if name == "request_id":
        return st.one_of(st.just(""), st.sampled_from(REQUEST_IDS), _from(pools.request_ids, ""))
    if name == "external_id":
        return st.one_of(_from(pools.external_ids, ""), st.uuids().map(str))
    if name == "page_token":
        high = max(pools.high.values() or [1])
        return st.one_of(st.just(""), st.integers(0, 1 << 16).map(lambda k: encode_token(k % high)))
    if name == "type":
        return st.sampled_from(sorted(ENTITY_TYPES))
    if name == "name" and f.containing_type.name == "UpsertEntityRequest":
        return st.one_of(st.sampled_from(ENTITY_NAMES), _from(pools.entity_names, "Alice"))
    if name == "label":
        return st.one_of(st.sampled_from(LABELS[:4]), _from(pools.labels, "leads"))
    return st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)


def _strings(pools: Pools, f: FieldDescriptor | None) -> st.SearchStrategy[str]:
    if pools.tame and f is not None:
        return _tame_strings(pools, f)
    generic = [
        st.just(""),
        st.sampled_from(WHITESPACE),
        st.sampled_from(ODD),
        st.sampled_from(FTS_SYNTAX),
        st.sampled_from(WORDS),
        st.text(max_size=20),
        st.sampled_from(LENGTH_EDGES).map(lambda n: "x" * n),
        st.sampled_from(LENGTH_EDGES).map(lambda n: ("word " * n)[:n]),
        st.sampled_from(LENGTH_EDGES).map(lambda n: "é" * n),
    ]
    name = f.name if f is not None else ""
    specific: list[st.SearchStrategy[str]] = []
    if name == "user_id":
        specific = [st.sampled_from(USERS), st.sampled_from(BAD_IDENTIFIERS)]
    elif name == "agent_id":
        specific = [st.sampled_from(AGENTS), st.sampled_from(BAD_IDENTIFIERS)]
    elif name == "thread_id":
        specific = [st.sampled_from(THREADS), st.sampled_from(BAD_IDENTIFIERS)]
    elif name == "request_id":
        specific = [st.sampled_from(REQUEST_IDS), _from(pools.request_ids, "r1")]
    elif name == "external_id":
        known = _from(pools.external_ids, str(uuid.UUID(int=1)))
        specific = [
            known,
            known.map(str.upper),
            known.map(lambda u: "{" + u + "}"),
            known.map(lambda u: "urn:uuid:" + u),
            st.uuids().map(str),
        ]
    elif name == "page_token":
        high = max(pools.high.values() or [1])
        specific = [
            st.integers(0, 1 << 16).map(lambda k: encode_token(k % (high + 3))),
            st.sampled_from([0, 2**63 - 1, -1, 2**63, 2**64, 10**30]).map(encode_token),
            st.sampled_from(["after:1", "after:x", "before:1", ":", "after:-1", "after: 1"]).map(
                lambda t: base64.urlsafe_b64encode(t.encode()).decode()
            ),
            st.binary(max_size=12).map(lambda b: base64.urlsafe_b64encode(b).decode()),
            st.sampled_from(["YWZ0ZXI6MQ==", "YWZ0ZXI6MQ", "!!!!", "=", "YWZ0ZXI6MQ===", "é"]),
        ]
    elif name == "type":
        types = sorted(ENTITY_TYPES)
        specific = [
            st.sampled_from(types),
            st.sampled_from(types).map(str.upper),
            st.sampled_from(types).map(lambda t: f" {t} "),
            st.sampled_from(["alien", "persons", "Person\x00"]),
        ]
    elif name == "name" and f is not None and f.containing_type.name == "UpsertEntityRequest":
        specific = [st.sampled_from(ENTITY_NAMES), _from(pools.entity_names, "Alice")]
    elif name == "label":
        specific = [st.sampled_from(LABELS), _from(pools.labels, "leads")]
    elif name in ("query", "prompt"):
        specific = [
            st.lists(st.sampled_from(WORDS + FTS_SYNTAX), min_size=1, max_size=6).map(" ".join),
            st.sampled_from(WORDS).map(lambda w: (w + " ") * 40),
        ]
    return st.one_of(*specific, *specific, *generic)


def _ids(pools: Pools, table: str | None) -> st.SearchStrategy[int]:
    edges = [st.sampled_from(INT64_EDGES), st.integers(-3, 40)]
    if table is None:
        return st.one_of(*edges)
    high = pools.high.get(table, 0)
    never = st.integers(1, 5).map(lambda d: high + d)
    existing = _from(pools.ids.get(table) or [], high + 1)
    rich = _from(pools.rich.get(table) or pools.ids.get(table) or [], high + 1)
    if pools.tame:
        return st.one_of(rich, existing)
    # Mostly rows that exist, so calls get past validation.
    return st.one_of(rich, existing, existing, never, *edges)


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(FLOAT_EDGES),
    st.integers(-(2**60), 2**60),
    st.text(max_size=10),
    st.sampled_from(ODD),
)


def _json_containers(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    )


JSON_VALUES = st.recursive(JSON_LEAVES, _json_containers, max_leaves=8)
TAME_STRUCTS = st.dictionaries(
    st.sampled_from(WORDS), st.one_of(st.integers(0, 9), st.sampled_from(WORDS)), max_size=3
)
STRUCTS = st.one_of(
    st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4),
    st.just({"big": "x" * 70_000}),
    st.just({"": None, "\x00": "nul key"}),
)


def non_finite(value) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(non_finite(v) for v in value)
    return False


def _mask_paths(resource: Descriptor | None, tame: bool) -> st.SearchStrategy[list[str]]:
    real = [f.name for f in resource.fields] if resource is not None else []
    writable = (
        [
            f.name
            for f in resource.fields
            if f.name != "id" and (f.message_type is None or "Timestamp" not in f.message_type.name)
        ]
        if resource is not None
        else []
    )
    if tame and writable:
        return st.lists(st.sampled_from(writable), min_size=1, max_size=2)
    path = st.one_of(
        *([st.sampled_from(real)] * 3 if real else []),
        st.sampled_from(MASK_JUNK),
        st.text(max_size=8),
        st.sampled_from(LENGTH_EDGES).map(lambda n: "p" * n),
    )
    return st.lists(path, max_size=4)


def _timestamp(data, ts: Message, label: str) -> None:
    ts.seconds = data.draw(
        st.one_of(st.integers(0, 2**33), st.sampled_from([-1, -(2**62), 2**62])), label
    )
    ts.nanos = data.draw(st.one_of(st.integers(0, 999_999_999), st.sampled_from([-1, 10**9])))


def _tame_scalar(f: FieldDescriptor, pools: Pools) -> st.SearchStrategy:
    t = f.type
    if t in INT64_TYPES:
        return _ids(pools, id_table(f)) if is_id_like(f) else st.integers(0, 10)
    if t in INT32_TYPES or t in UINT_TYPES:
        return st.one_of(st.integers(0, 4), st.sampled_from([10, 50, 100]))
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(0, 1, width=64 if t == FieldDescriptor.TYPE_DOUBLE else 32)
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=8)
    if t == FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in f.enum_type.values]
        return st.sampled_from(known[1:] or known)
    raise AssertionError(f"no strategy for field {f.full_name} of type {t}")


def _scalar(data, f: FieldDescriptor, pools: Pools, label: str):
    t = f.type
    if pools.tame and t != FieldDescriptor.TYPE_STRING:
        return data.draw(_tame_scalar(f, pools), label)
    if t in INT64_TYPES:
        if is_id_like(f):
            return data.draw(_ids(pools, id_table(f)), label)
        return data.draw(st.one_of(st.sampled_from(INT64_EDGES), st.integers(-5, 100)), label)
    if t in INT32_TYPES:
        return data.draw(st.one_of(st.integers(-2, 6), st.sampled_from(INT32_EDGES)), label)
    if t in UINT_TYPES:
        top = UINT_TYPES[t]
        return data.draw(st.one_of(st.integers(0, 10), st.sampled_from([top, top // 2])), label)
    if t == FieldDescriptor.TYPE_BOOL:
        return data.draw(st.booleans(), label)
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        width = 64 if t == FieldDescriptor.TYPE_DOUBLE else 32
        return data.draw(
            st.one_of(
                st.sampled_from(FLOAT_EDGES),
                st.floats(0, 1, width=width),
                st.floats(width=width, allow_nan=True, allow_infinity=True),
            ),
            label,
        )
    if t == FieldDescriptor.TYPE_STRING:
        return data.draw(_strings(pools, f), label)
    if t == FieldDescriptor.TYPE_BYTES:
        return data.draw(st.binary(max_size=40), label)
    if t == FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in f.enum_type.values]
        return data.draw(
            st.one_of(
                st.sampled_from(known), st.sampled_from(known), st.sampled_from([-1, 99, 2**31 - 1])
            ),
            label,
        )
    raise AssertionError(f"no strategy for field {f.full_name} of type {t}")


def _set_field(
    data, msg: Message, f: FieldDescriptor, pools: Pools, depth: int, label: str
) -> None:
    sub = f.message_type
    if sub is not None and sub.GetOptions().map_entry:
        container = getattr(msg, f.name)
        key_f, value_f = sub.fields_by_name["key"], sub.fields_by_name["value"]
        for i in range(data.draw(st.integers(0, 3), f"{label}#size")):
            key = _scalar(data, key_f, pools, f"{label}[{i}].key")
            if value_f.message_type is not None:
                fill_message(data, container[key], pools, depth + 1, f"{label}[{key!r}]")
            else:
                container[key] = _scalar(data, value_f, pools, f"{label}[{key!r}]")
        return
    if f.is_repeated:
        container = getattr(msg, f.name)
        if sub is not None:
            for i in range(data.draw(st.integers(0, 2), f"{label}#size")):
                fill_message(data, container.add(), pools, depth + 1, f"{label}[{i}]")
            return
        if is_id_like(f) and not pools.tame and data.draw(st.integers(0, 9), f"{label}#n") == 0:
            # One past the most ids a request may carry.
            existing = pools.ids.get(id_table(f) or "") or [1]
            container.extend((existing * 1001)[:1001])
            return
        size = data.draw(st.integers(0, 5), f"{label}#size")
        container.extend(_scalar(data, f, pools, f"{label}[{i}]") for i in range(size))
        return
    if sub is None:
        setattr(msg, f.name, _scalar(data, f, pools, label))
        return
    target = getattr(msg, f.name)
    if sub.full_name == "google.protobuf.Struct":
        target.update(data.draw(TAME_STRUCTS if pools.tame else STRUCTS, label))
    elif sub.full_name == "google.protobuf.FieldMask":
        resources = [x.message_type for x in msg.DESCRIPTOR.fields if x.message_type is not None]
        resource = next((r for r in resources if not r.full_name.startswith("google.")), None)
        target.paths.extend(data.draw(_mask_paths(resource, pools.tame), label))
    elif sub.full_name == "google.protobuf.Timestamp":
        _timestamp(data, target, label)
    elif depth >= 4:
        target.SetInParent()
    else:
        fill_message(data, target, pools, depth + 1, label)


def fill_message(data, msg: Message, pools: Pools, depth: int = 0, prefix: str = "") -> Message:
    """Sets a random subset of ``msg``'s fields (at most one per oneof)."""
    desc = msg.DESCRIPTOR
    for oneof in desc.oneofs:
        members = list(oneof.fields)
        choice = data.draw(st.sampled_from([None, *members]), f"{prefix}{oneof.name}?")
        if choice is not None:
            _set_field(data, msg, choice, pools, depth, f"{prefix}{choice.name}")
    for f in desc.fields:
        if f.containing_oneof is not None:
            continue
        if data.draw(st.integers(0, 9), f"{prefix}{f.name}?") < (9 if pools.tame else 6):
            _set_field(data, msg, f, pools, depth, f"{prefix}{f.name}")
    return msg


# Oracles -----------------------------------------------------------------------


def _structs(msg: Message):
    for f, value in msg.ListFields():
        if f.message_type is None:
            continue
        values = value if f.is_repeated else [value]
        for v in values:
            if f.message_type.full_name == "google.protobuf.Struct":
                yield v
            elif not f.message_type.GetOptions().map_entry:
                yield from _structs(v)


def _struct_dict(struct: Message) -> dict:
    def value(v):
        kind = v.WhichOneof("kind")
        if kind == "struct_value":
            return {k: value(x) for k, x in v.struct_value.fields.items()}
        if kind == "list_value":
            return [value(x) for x in v.list_value.values]
        return getattr(v, kind) if kind else None

    return {k: value(v) for k, v in struct.fields.items()}


def static_problems(method: MethodDescriptor, request: Message) -> list[str]:
    """Why ``request`` is wrong on its face, whatever the database holds."""
    problems = []
    for f, value in request.ListFields():
        if f.type in INT32_TYPES and not f.is_repeated and value < 0:
            problems.append(f"{f.name} is negative")
        if is_id_like(f) and any(x < 0 for x in (value if f.is_repeated else [value])):
            problems.append(f"{f.name} is a negative id")
        if f.type == FieldDescriptor.TYPE_ENUM and value not in {
            v.number for v in f.enum_type.values
        }:
            problems.append(f"{f.name} is not a known {f.enum_type.name}")
        if f.type == FieldDescriptor.TYPE_STRING and "\x00" in value:
            problems.append(f"{f.name} contains NUL")
        # A user id is an identifier wherever it is a request's own field: no
        # surrounding spaces ("bob " is not "bob"), no control characters, and
        # at most MAX_ID_CHARS.
        if f.name == "user_id" and (
            value != value.strip() or len(value) > MAX_ID_CHARS or CONTROL_CHARS.search(value)
        ):
            problems.append(f"{f.name} is not a valid identifier")
        if f.message_type is not None and f.message_type.full_name == "google.protobuf.FieldMask":
            resources = [
                x.message_type
                for x in request.DESCRIPTOR.fields
                if x.message_type is not None and not x.message_type.full_name.startswith("google.")
            ]
            names = {x.name for r in resources for x in r.fields}
            if any(p not in names for p in value.paths):
                problems.append("update_mask names a field the resource does not have")
        if (
            method.name.startswith(("Create", "Import"))
            and f.message_type is not None
            and not f.message_type.full_name.startswith("google.")
        ):
            # A created resource's own fields are input too (except its id).
            for sub_f, sub_value in value.ListFields():
                if is_id_like(sub_f) and sub_f.name != "id" and sub_value < 0:
                    problems.append(f"{f.name}.{sub_f.name} is a negative id")
                if sub_f.type == FieldDescriptor.TYPE_STRING and "\x00" in sub_value:
                    problems.append(f"{f.name}.{sub_f.name} contains NUL")
    if any(non_finite(_struct_dict(x)) for x in _structs(request)):
        problems.append("metadata holds a non-finite number")
    return problems


def never_existed(method: MethodDescriptor, request: Message, pools: Pools) -> bool:
    """A Get or Delete of an id above every id its table ever handed out."""
    if not method.name.startswith(("Get", "Delete")) or method.server_streaming:
        return False
    f = request.DESCRIPTOR.fields_by_name.get("id")
    if f is None or (f.containing_oneof is not None and not request.HasField("id")):
        return False
    table = id_table(f)
    return table in pools.high and request.id > pools.high[table]


# Id fields that do not name a row to act on, so an unused value is no
# missing row: who is asking (a memory's origin session, checked like a
# user id) and a resume cursor (beyond the last event means "from now").
NOT_REFERENCES = {
    "GetMemoryRequest.session_id",
    "UpdateMemoryRequest.session_id",
    "DeleteMemoryRequest.session_id",
    "WatchExtractionsRequest.after_event_id",
}


def dangling(method: MethodDescriptor, request: Message, pools: Pools) -> list[str]:
    """The fields naming a row no table ever held.  Such a call cannot
    succeed (List calls excepted: there a parent id is a filter)."""
    if method.name.startswith("List"):
        return []
    found: list[str] = []

    def check(msg: Message, prefix: str, only: set[str] | None, skip: set[str]) -> None:
        for f, value in msg.ListFields():
            if not is_id_like(f) or f"{msg.DESCRIPTOR.name}.{f.name}" in NOT_REFERENCES:
                continue
            if f.name in skip or (only is not None and f.name not in only):
                continue
            table = id_table(f)
            values = value if f.is_repeated else [value]
            if table in pools.high and any(x > pools.high[table] for x in values):
                found.append(prefix + f.name)

    check(request, "", None, set())
    if method.name.startswith(("Create", "Update", "Import")):
        paths = set()
        for f, value in request.ListFields():
            if f.message_type is not None and f.message_type.full_name.endswith("FieldMask"):
                paths = set(value.paths)
        for f, value in request.ListFields():
            if f.message_type is None or f.message_type.full_name.startswith("google."):
                continue
            if method.name.startswith(("Create", "Import")):
                check(value, f"{f.name}.", None, {"id"})  # a new row's id is output only
            else:
                check(value, f"{f.name}.", {"id"} | paths, set())  # unmasked: ignored
    return found


# The world ---------------------------------------------------------------------

PASS1 = "You choose which stored memories"
PASS2 = "You rank stored memories"
EXTRACTION = "You build a knowledge graph"
LLM_MODES = ["ok", "ok", "ok", "error", "garbage", "empty", "stream_error", "missing_model"]


class ScriptedModel:
    """The Ollama stand-in's answers: plausible, or failing as the example drew."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.rng = random.Random(0)

    def __call__(self, endpoint: str, body: dict) -> Reply | None:
        if endpoint not in ("/api/chat", "/api/generate"):
            return None
        text = RecordedRequest("POST", endpoint, body).prompt_text()
        if EXTRACTION in text:
            return Reply.of(
                {
                    "entities": [
                        {"name": "Alice", "type": "person", "notes": "leads Atlas"},
                        {"name": "Atlas", "type": "project", "notes": None},
                    ],
                    "relationships": [{"from": "Alice", "to": "Atlas", "label": "leads"}],
                }
            )
        mode = self.mode
        if mode == "error":
            return Reply.error_status(500, "model runner crashed")
        if mode == "missing_model":
            return Reply.error_status(404, 'model "qwen2.5:3b" not found, try pulling it first')
        if mode == "garbage":
            return Reply.garbage()
        if mode == "empty":
            return Reply.of("")
        if mode == "stream_error":
            return Reply(
                content="half an answer", stream_error="llama runner process has terminated"
            )
        found = [int(x) for x in re.findall(r"\[(\d+)\]", text)]
        # Ids as a model might write them, and invented ones.
        ids = found + [str(i) for i in found[:2]] + [float(i) for i in found[:1]]
        ids += [10**9, -1, True, None, "x"]
        # json.dumps writes NaN and Infinity bare, as a sloppy model might.
        odd = [0.0, 1.0, 0.5, 2.0, -0.5, "high", "0.7", None, math.nan, math.inf, True, [1]]
        if PASS1 in text:
            picked = self.rng.sample(ids, k=self.rng.randint(0, len(ids)))
            return Reply.of(
                {
                    "selected": [
                        {
                            "id": i,
                            "relevance": self.rng.choice(odd),
                            "category": self.rng.choice(["necessary", "supporting", "?"]),
                        }
                        for i in picked
                    ]
                }
            )
        if PASS2 in text:
            return Reply.of({"ranked": [{"id": i, "relevance": self.rng.choice(odd)} for i in ids]})
        return Reply.of(self.rng.choice(["A short summary.", "<|im_start|>Summary<|im_end|> text"]))


TABLE_ID_COLUMNS = {
    "projects": "id",
    "sessions": "id",
    "episodes": "id",
    "memories": "id",
    "entities": "id",
    "relationships": "id",
    "summaries": "id",
    "extraction_events": "id",
}
# A project DeleteProject took is gone for every call at once, while its
# erasure (which the world's stopped workers never run) still holds its rows:
# the pools leave them out, as a client never sees them again.
_GONE = "(SELECT id FROM projects WHERE deleting IS NOT NULL)"
_LIVE_ROWS = {
    "projects": "deleting IS NULL",
    "sessions": f"project_id IS NULL OR project_id NOT IN {_GONE}",
    "episodes": "session_id IN (SELECT id FROM sessions"
    f" WHERE project_id IS NULL OR project_id NOT IN {_GONE})",
    "memories": f"project_id NOT IN {_GONE}",
    "entities": f"project_id NOT IN {_GONE}",
    "summaries": f"project_id IS NULL OR project_id NOT IN {_GONE}",
    "extraction_events": f"project_id NOT IN {_GONE}",
}


class _PgReader:
    """A separate PostgreSQL connection read the way the SQLite one is: ``?``
    placeholders, rows by index (store/postgres/database.py's PgConnection)."""

    def __init__(self, url: str) -> None:
        import psycopg

        from nexus_grpc.store.postgres.database import PgConnection

        self.raw = psycopg.connect(url, autocommit=True)
        self.conn = PgConnection(self.raw)

    def execute(self, sql: str, params=()):
        return self.conn.execute(sql, params)

    def close(self) -> None:
        self.raw.close()


class World:
    """One server, database, stub and loop shared by every example."""

    def __init__(self, tmp: Path, store: str = "sqlite") -> None:
        self.store = store
        self.database_url = ""
        if store == "postgresql":
            from tests import pg

            self.database_url = pg.new_database()
        self.loop = asyncio.new_event_loop()
        self.loop_errors: list[str] = []
        self.loop.set_exception_handler(lambda _loop, ctx: self.loop_errors.append(str(ctx)))
        self.model = ScriptedModel()
        self.stub = OllamaStub(responder=self.model).start()
        self.server_errors: list[logging.LogRecord] = []
        self._handler = _Collector(self.server_errors)
        logging.getLogger("nexus_grpc").addHandler(self._handler)
        # The access log at INFO, to this file's handlers only (not to the
        # capture of every test): one line per RPC is how calls are counted.
        self.finished = _Finished()
        access = logging.getLogger("nexus_grpc.access")
        self._access_state = (access.level, access.propagate)
        access.setLevel(logging.INFO)
        access.propagate = False
        access.addHandler(self.finished)
        access.addHandler(self._handler)
        store_settings = {"database_url": self.database_url} if self.database_url else {}
        self.h: Harness = self.run(
            start_harness(
                tmp / "data",
                ollama_url=self.stub.url,
                llm_timeout=10.0,
                job_max_attempts=2,
                **store_settings,
            )
        )
        self.run(self._seed_and_settle())
        self._digest: dict[str, tuple[int, str]] = {}
        self._digest_version: object = -1
        if self.database_url:
            self.ro: sqlite3.Connection | _PgReader = _PgReader(self.database_url)
            # Every table, the pgvector ones included: a vector is written in
            # its row's transaction there, so "writes nothing" covers it too.
            # Sequences are not tables: PostgreSQL's are not transactional (a
            # rolled-back insert still spends its id), unlike sqlite_sequence.
            self.tables = [
                r[0]
                for r in self.ro.execute(
                    "SELECT table_name FROM information_schema.tables"
                    " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
                    " ORDER BY table_name"
                )
            ]
            return
        path = self.h.app.settings.sqlite_path
        self.ro = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
        )
        self.tables = [
            name
            for name, sql in self.ro.execute(
                "SELECT name, sql FROM sqlite_master WHERE type='table'"
            )
            if not (sql or "").upper().startswith("CREATE VIRTUAL")
        ]

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.ro.close()
        self.run(self.h.close())
        self.stub.stop()
        if self.database_url:
            from tests import pg

            pg.drop_database(self.database_url)
        logging.getLogger("nexus_grpc").removeHandler(self._handler)
        access = logging.getLogger("nexus_grpc.access")
        access.removeHandler(self.finished)
        access.removeHandler(self._handler)
        access.setLevel(self._access_state[0])
        access.propagate = self._access_state[1]
        self.loop.close()

    # Seed data -----------------------------------------------------------------

    async def _seed_and_settle(self) -> None:
        await self.seed()
        # Extraction and indexing of the seed finish, so watches have events to
        # replay; then the workers stop (see the module docstring).
        app = self.h.app

        async def settled() -> bool:
            def counts(c):
                busy = c.execute(
                    "SELECT count(*) FROM jobs WHERE state IN ('pending', 'running')"
                ).fetchone()[0]
                events = c.execute("SELECT count(*) FROM extraction_events").fetchone()[0]
                episodes = c.execute("SELECT count(*) FROM episodes").fetchone()[0]
                return busy == 0 and events >= episodes

            return await app.db.read_sql(counts)

        await wait_until(settled, timeout=60)
        for worker in app.workers:
            await worker.stop()
        # They merge the FTS shadow tables, which the digest reads: the keyword
        # upkeep, and the storage upkeep's scrub a minute after a delete.
        if app.keyword_upkeep is not None:
            await app.keyword_upkeep.stop()
        await app.storage_upkeep.stop()
        if app._background:
            await asyncio.gather(*app._background)

    async def seed(self) -> None:
        h = self.h
        projects = [
            await h.memory.CreateProject(
                memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name=n))
            )
            for n in ("Atlas", "Borealis")
        ]
        sessions = [
            await h.memory.CreateSession(
                memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=p))
            )
            for p in (projects[0].id, projects[0].id, projects[1].id, 0)
        ]
        await self.seed_more(projects, sessions)

    async def seed_more(self, projects, sessions) -> None:
        """A little of everything that refers to the given projects and sessions."""
        h = self.h
        for i, ses in enumerate(sessions):
            for j, text in enumerate(("postgres port is 5432", "deploy atlas with docker")):
                await h.memory.CreateEpisode(
                    memory_pb2.CreateEpisodeRequest(
                        session_id=ses.id,
                        user_message=f"{text} ({i}.{j})",
                        ai_response="noted; the backup runs nightly",
                        request_id=f"seed-{ses.id}-{j}",
                    )
                )
        p = projects[0].id
        s0 = sessions[0].id
        kinds = [
            memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=p, title="postgres port"
            ),
            memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_PROJECT,
                project_id=p,
                title="deploy steps",
                tier=memory_pb2.TIER_TASK,
                session_id=s0,
                agent_id="agent-1",
            ),
            memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_PROJECT,
                project_id=p,
                title="old",
                tier=memory_pb2.TIER_ARCHIVE,
            ),
            memory_pb2.Memory(kind=memory_pb2.MEMORY_KIND_USER, user_id="alice", title="likes tea"),
            memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER,
                user_id="alice",
                project_id=p,
                title="alice port",
                tier=memory_pb2.TIER_SESSION,
                session_id=s0,
            ),
            memory_pb2.Memory(kind=memory_pb2.MEMORY_KIND_USER, user_id="bob", title="bob backup"),
        ]
        for mem in kinds:
            mem.content = f"details about {mem.title}"
            await h.memory.CreateMemory(memory_pb2.CreateMemoryRequest(memory=mem))
        a = await h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name="Ada", type="person", project_id=p)
        )
        b = await h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name="Postgres", type="technology", project_id=p)
        )
        await h.graph.UpsertEntity(graph_pb2.UpsertEntityRequest(name="Zed", type="concept"))
        await h.graph.UpsertRelationship(
            graph_pb2.UpsertRelationshipRequest(from_id=a.id, to_id=b.id, label="uses")
        )
        await h.summary.CreateSummary(
            summary_pb2.CreateSummaryRequest(
                summary=summary_pb2.Summary(session_id=s0, content="they set up postgres")
            )
        )
        await h.summary.CreateSummary(
            summary_pb2.CreateSummaryRequest(
                summary=summary_pb2.Summary(project_id=p, content="atlas overview")
            )
        )
        for user, thread in (("alice", "t1"), ("", "t2")):
            scope = memory_pb2.MemoryScope(project_id=p, user_id=user, session_id=s0)
            async for _ in h.memory.SelectMemories(
                memory_pb2.SelectMemoriesRequest(
                    prompt="postgres port?", scope=scope, thread_id=thread
                )
            ):
                pass

    async def finish_erasures(self) -> None:
        """Every running erasure's steps, as the stopped erase worker would
        take them (the disk's scrub aside)."""
        from nexus_grpc.core import erasure as erasure_state
        from nexus_grpc.domain import erasure as erasing

        db = self.h.app.db
        running = await db.read_sql(
            lambda c: [r[0] for r in c.execute("SELECT id FROM erasures WHERE state = 1")]
        )
        for erasure_id in running:
            while True:
                now = await db.write(lambda u, i=erasure_id: erasing.step(u, i, time.time()))
                if now is None or now.done or now.phase == erasure_state.DISK:
                    break
            await db.write(lambda u, i=erasure_id: erasing.finish(u, i))

    async def top_up(self, pools: Pools) -> None:
        """Random deletes drain the seed: refill it when too little is left."""
        rich, ids = pools.rich, pools.ids
        if (
            len(rich["sessions"]) >= 3
            and len(rich["projects"]) >= 1
            and len(rich["entities"]) >= 2
            and all(len(ids[t]) >= 3 for t in ("memories", "summaries"))
        ):
            return
        h = self.h
        projects = [
            await h.memory.CreateProject(
                memory_pb2.CreateProjectRequest(
                    project=memory_pb2.Project(name=f"refill {uuid.uuid4()}")
                )
            )
        ]
        sessions = [
            await h.memory.CreateSession(
                memory_pb2.CreateSessionRequest(
                    session=memory_pb2.Session(project_id=projects[0].id)
                )
            ),
            await h.memory.CreateSession(
                memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
            ),
        ]
        await self.seed_more(projects, sessions)

    # Reading the database ------------------------------------------------------

    def _begin(self) -> None:
        """One snapshot for the reads that follow, until ``COMMIT``."""
        if self.database_url:
            self.ro.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        else:
            self.ro.execute("BEGIN")

    def _highest_ids(self) -> dict[str, int]:
        """The highest id each table has handed out (deleted rows' included)."""
        if self.database_url:
            rows = self.ro.execute("SELECT sequencename, last_value FROM pg_sequences")
            return {
                name.removesuffix("_id_seq"): value or 0
                for name, value in rows
                if name.endswith("_id_seq")
            }
        return {name: seq for name, seq in self.ro.execute("SELECT name, seq FROM sqlite_sequence")}

    def pools(self) -> Pools:
        c = self.ro
        self._begin()
        try:
            p = Pools()
            for table, column in TABLE_ID_COLUMNS.items():
                live = f" WHERE {_LIVE_ROWS[table]}" if table in _LIVE_ROWS else ""
                p.ids[table] = [r[0] for r in c.execute(f"SELECT {column} FROM {table}{live}")]
            p.high = self._highest_ids()
            for table in TABLE_ID_COLUMNS:
                p.high.setdefault(table, 0)
            p.rich["sessions"] = [
                r[0] for r in c.execute("SELECT DISTINCT session_id FROM episodes")
            ]
            p.rich["projects"] = [
                r[0]
                for r in c.execute(
                    "SELECT DISTINCT s.project_id FROM sessions s JOIN episodes e"
                    " ON e.session_id = s.id WHERE s.project_id IS NOT NULL"
                )
            ]
            p.rich["entities"] = [
                r[0]
                for r in c.execute(
                    "SELECT from_id FROM relationships UNION SELECT to_id FROM relationships"
                )
            ]
            p.external_ids = [r[0] for r in c.execute("SELECT external_id FROM sessions")]
            p.entity_names = [r[0] for r in c.execute("SELECT name FROM entities LIMIT 20")]
            p.labels = [r[0] for r in c.execute("SELECT label FROM relationships LIMIT 20")]
            p.request_ids = [
                r[0]
                for r in c.execute("SELECT request_id FROM memories WHERE request_id IS NOT NULL")
            ]
            return p
        finally:
            c.execute("COMMIT")

    def digest(self) -> dict[str, tuple[int, str]]:
        """Row count and a content hash of every table, in one snapshot.

        ``PRAGMA data_version`` changes exactly when another connection has
        committed since this one last looked: while it stands still, the
        previous digest still holds and the tables are not read again.

        On PostgreSQL the first transaction id not yet handed out plays that
        part: every transaction that writes takes one, and reads never do.
        Each table is then read as its rows' text, sorted, in the same
        snapshot.
        """
        c = self.ro
        self._begin()
        try:
            if self.database_url:
                version = c.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())").fetchone()
                version = str(version[0])
            else:
                version = c.execute("PRAGMA data_version").fetchone()[0]
            if version != self._digest_version:
                out = {}
                for table in self.tables:
                    if self.database_url:
                        count, text = c.execute(
                            f"SELECT count(*), coalesce(string_agg(t::text, chr(10)"
                            f" ORDER BY t::text), '') FROM \"{table}\" t"
                        ).fetchone()
                        out[table] = (
                            count,
                            hashlib.blake2b(text.encode(), digest_size=16).hexdigest(),
                        )
                        continue
                    # A full scan walks the b-tree: rowid (or primary key)
                    # order, so equal contents give equal text.
                    rows = c.execute(f'SELECT * FROM "{table}"').fetchall()
                    out[table] = (
                        len(rows),
                        hashlib.blake2b(repr(rows).encode(), digest_size=16).hexdigest(),
                    )
                self._digest, self._digest_version = out, version
            return self._digest
        finally:
            c.execute("COMMIT")

    def stored_events(self, request: Message) -> list[int]:
        """Ids of the stored events a valid watch request must replay first."""
        filters = [
            (col, getattr(request, col))
            for col in ("episode_id", "session_id", "project_id")
            if getattr(request, col)
        ]
        after = request.after_event_id
        if len(filters) > 1 or after < 0 or any(v < 0 for _, v in filters):
            return []
        where = " AND ".join(["id > ?", *(f"{col} = ?" for col, _ in filters)])
        rows = self.ro.execute(
            f"SELECT id FROM extraction_events WHERE {where} ORDER BY id",
            (after, *(v for _, v in filters)),
        )
        return [r[0] for r in rows]


class _Collector(logging.Handler):
    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record)


class _Finished(logging.Handler):
    """Counts the access log's one line per finished RPC: the interceptor
    writes it last, also for a stream the client hung up on, so a count that
    caught up means the server is done with every call made so far."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0
        self.changed = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.INFO:
            self.count += 1
            self.changed.set()

    async def reach(self, target: int) -> None:
        async with asyncio.timeout(CALL_TIMEOUT):
            while self.count < target:
                self.changed.clear()
                await self.changed.wait()


# Calling -----------------------------------------------------------------------


@dataclass
class Outcome:
    code: grpc.StatusCode
    details: str
    responses: list[Message]


def _path(method: MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


async def invoke(
    world: World, method: MethodDescriptor, request: Message, hang_up: int | None = None
) -> Outcome:
    """Calls ``method`` and waits until the server is done with it too.
    ``hang_up``: for a stream, cancel it after that many messages."""
    mark = world.finished.count
    outcome = None
    try:
        outcome = await _invoke(world, method, request, hang_up)
        return outcome
    finally:
        await world.finished.reach(mark + 1)
        if outcome is not None and outcome.code == grpc.StatusCode.CANCELLED:
            # A handler cancelled while its write waited in the writer's queue
            # ends before that write commits; the queue is first in, first
            # out, so an empty write behind it returns once it has landed.
            # On PostgreSQL each pooled connection has its own one thread: a
            # no-op queued on every one returns once all work before it is done.
            db = world.h.app.db
            if world.database_url:
                for slot in list(db._slots):
                    await db._on(slot, lambda: None)
            else:
                await db.write(lambda conn: None)


async def _invoke(
    world: World, method: MethodDescriptor, request: Message, hang_up: int | None
) -> Outcome:
    channel = world.h.channel
    kwargs = dict(
        request_serializer=type(request).SerializeToString,
        response_deserializer=GetMessageClass(method.output_type).FromString,
    )
    responses: list[Message] = []
    if method.client_streaming:
        return await _import_one(channel, method, request, kwargs)
    if not method.server_streaming:
        try:
            responses.append(
                await channel.unary_unary(_path(method), **kwargs)(request, timeout=CALL_TIMEOUT)
            )
        except grpc.aio.AioRpcError as exc:
            return Outcome(exc.code(), exc.details() or "", responses)
        return Outcome(OK, "", responses)
    call = channel.unary_stream(_path(method), **kwargs)(request, timeout=CALL_TIMEOUT)
    if method.name != EVENT_WATCH:
        try:
            async for item in call:
                responses.append(item)
                if len(responses) == hang_up:
                    call.cancel()
                    return Outcome(grpc.StatusCode.CANCELLED, "", responses)
                if method.name == "WatchErasure":
                    # It ends when its erasure is done, and the world's workers
                    # stop before the fuzz: the erasure as it stands is the answer.
                    call.cancel()
                    return Outcome(OK, "", responses)
        except grpc.aio.AioRpcError as exc:
            return Outcome(exc.code(), exc.details() or "", responses)
        return Outcome(OK, "", responses)
    # A watch never ends by itself: take what is stored (a few), give a bad
    # request time to fail, then hang up.
    want = min(len(world.stored_events(request)), WATCH_TAKE)
    idle = CALL_TIMEOUT if static_problems(method, request) else WATCH_IDLE
    try:
        while len(responses) < want:
            item = await asyncio.wait_for(call.read(), CALL_TIMEOUT)
            if item is grpc.aio.EOF:
                break
            responses.append(item)
        if not responses:
            try:
                item = await asyncio.wait_for(call.read(), idle)
            except TimeoutError:
                pass
            else:
                if item is not grpc.aio.EOF:
                    responses.append(item)
    except grpc.aio.AioRpcError:
        pass
    call.cancel()
    code = await call.code()
    if code == grpc.StatusCode.CANCELLED:
        code = OK  # we hung up on a live stream
    return Outcome(code, await call.details() or "", responses)


_CODES = {code.value[0]: code for code in grpc.StatusCode}


async def _import_one(channel, method: MethodDescriptor, request: Message, kwargs) -> Outcome:
    """A client stream of this one request. An ImportEpisodes item's error is reported
    in the answer (the call is OK, the others go on); alone in its stream, that
    error is what the call says about it, so it is judged like a unary call's
    status: the right code, a message, and nothing written."""
    try:
        answer = await channel.stream_unary(_path(method), **kwargs)(
            iter([request]), timeout=CALL_TIMEOUT
        )
    except grpc.aio.AioRpcError as exc:
        return Outcome(exc.code(), exc.details() or "", [])
    if method.name == "RestoreProject":
        # All or nothing: any bad record fails the call itself, so an answer
        # means the stream (one project record) was restored as a new project.
        assert answer.project_id > 0, answer
        return Outcome(OK, "", [answer])
    if answer.errors:
        [error] = answer.errors
        assert error.index == 0 and answer.failed == 1, answer
        return Outcome(_CODES[error.code], error.message, [answer])
    assert answer.received == 1 and answer.episode_ids[0] > 0, answer
    return Outcome(OK, "", [answer])


def _shown(request: Message) -> str:
    text = text_format.MessageToString(request, as_utf8=True, as_one_line=True)
    # Long runs of one character (the length edges) as "x*10001".
    text = re.sub(r"(.)\1{19,}", lambda r: f"{r.group(1)}*{len(r.group(0))}", text)
    text = re.sub(r"((?:word ){3})(?:word ?)+", r"\1...", text)
    return text if len(text) < 3000 else text[:3000] + f"... ({len(text)} chars)"


def check_one(world: World, method: MethodDescriptor, data) -> None:
    pools = world.pools()
    world.run(world.top_up(pools))
    pools = world.pools()
    pools.tame = data.draw(st.booleans(), "tame")
    request = fill_message(data, GetMessageClass(method.input_type)(), pools)
    world.model.mode = data.draw(st.sampled_from(LLM_MODES), "llm mode")
    world.model.rng = random.Random(data.draw(st.integers(0, 2**32), "llm seed"))
    shown = f"{method.name}({_shown(request)}) [llm {world.model.mode}]"
    note(shown)
    problems = [p for p in static_problems(method, request) if (method.name, p) not in KNOWN_GAPS]
    missing = never_existed(method, request, pools)
    refs = dangling(method, request, pools)
    asked_before = len(world.stub.requests_to("/api/chat"))
    before = world.digest()
    hang_up = data.draw(st.sampled_from([None, None, None, 1, 2]), "hang up after")
    outcome = world.run(invoke(world, method, request, hang_up))
    hypothesis_event(f"{'tame' if pools.tame else 'wild'} {outcome.code.name}")
    after = world.digest()
    if outcome.code == OK and method.name in ("ForgetUser", "DeleteProject"):
        # The world's workers are stopped: the erasure the call started runs
        # to its end here, as its job would, before the next draw.
        world.run(world.finish_erasures())
    asked = len(world.stub.requests_to("/api/chat")) > asked_before
    said = f"{shown} -> {outcome.code.name}: {outcome.details[:300]}"

    errors, world.server_errors[:] = list(world.server_errors), []
    assert not errors, f"{said}\nserver logged: {[r.getMessage() for r in errors]}"
    loop_errors, world.loop_errors[:] = list(world.loop_errors), []
    assert not loop_errors, f"{said}\nloop: {loop_errors}"
    if outcome.code == grpc.StatusCode.CANCELLED and hang_up == len(outcome.responses):
        # We hung up mid-stream: what the server had done by then stands.
        return
    assert outcome.code in ALLOWED, said
    if outcome.code == grpc.StatusCode.UNAVAILABLE:
        assert asked and world.model.mode != "ok", f"UNAVAILABLE without a failing model: {said}"
    if outcome.code != OK:
        assert outcome.details.strip(), f"an error without a message: {said}"
    if problems:
        assert outcome.code == INVALID, f"expected INVALID_ARGUMENT ({problems}): {said}"
    elif missing:
        assert outcome.code == NOT_FOUND, f"expected NOT_FOUND for an id never used: {said}"
    elif refs:
        assert outcome.code != OK, f"OK, though {refs} name rows that never existed: {said}"
    if outcome.code != OK or method.name.startswith(("Get", "List", "Search", "Watch", "Export")):
        changed = sorted(t for t in before if before[t] != after[t])
        if asked:
            # The account of the LLM calls made is kept whatever the answer:
            # the model's time was spent (docs/usage.md).
            changed = [t for t in changed if t != "llm_calls"]
        assert not changed, f"tables {changed} changed: {said}"
    if outcome.code == OK and method.name.startswith(("Create", "Upsert")):
        assert outcome.responses[0].id > 0, said
    if outcome.code == OK:
        check_sizes(request, outcome.responses, said)
    if outcome.code == OK and method.name.startswith(("Get", "Update")):
        check_echo(method, request, outcome.responses[0], said)
    if outcome.code == OK and method.name.startswith("List"):
        check_next_page(world, method, request, outcome.responses[0], said)
    if method.name == EVENT_WATCH:
        stored = set(pools.ids["extraction_events"])
        for event in outcome.responses:
            assert event.event_id > request.after_event_id, said
            for col in ("episode_id", "session_id", "project_id"):
                wanted = getattr(request, col)
                assert not wanted or getattr(event, col) == wanted, said
            assert event.event_id in stored, said


def _items(response: Message) -> list[Message]:
    """A List response's rows: its one repeated message field."""
    [rows] = [f for f in response.DESCRIPTOR.fields if f.is_repeated and f.message_type]
    return list(getattr(response, rows.name))


def check_sizes(request: Message, responses: list[Message], said: str) -> None:
    """No more rows than asked for (or than the documented default)."""
    fields = request.DESCRIPTOR.fields_by_name
    if "limit" in fields:
        assert len(responses) <= (request.limit or DEFAULT_SEARCH_LIMIT), said
    if "page_size" in fields:
        size = min(request.page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        assert len(_items(responses[0])) <= size, said


def check_echo(method: MethodDescriptor, request: Message, response: Message, said: str) -> None:
    """A Get answers the row it was asked for; an Update answers its row
    with every masked field as sent."""
    fields = request.DESCRIPTOR.fields_by_name
    if method.name.startswith("Get") and "id" in fields and request.id:
        assert response.id == request.id, said
    if not method.name.startswith("Update"):
        return
    [resource] = [
        f for f in request.DESCRIPTOR.fields
        if f.message_type is not None and not f.message_type.full_name.startswith("google.")
    ]  # fmt: skip
    sent = getattr(request, resource.name)
    assert response.id == sent.id, said
    for path in request.update_mask.paths:
        assert getattr(response, path) == getattr(sent, path), f"{path} differs: {said}"


def check_next_page(
    world: World, method: MethodDescriptor, request: Message, page: Message, said: str
) -> None:
    """A next_page_token the server issued is accepted, and the page it
    leads to repeats no row of this one."""
    if "next_page_token" not in page.DESCRIPTOR.fields_by_name or not page.next_page_token:
        return
    follow = type(request)()
    follow.CopyFrom(request)
    follow.page_token = page.next_page_token
    nxt = world.run(invoke(world, method, follow))
    assert nxt.code == OK, f"the next page of {said} -> {nxt.code.name}: {nxt.details}"
    seen = {row.id for row in _items(page)}
    assert not seen & {row.id for row in _items(nxt.responses[0])}, said


# Findings that are open in code this file may not change go here, each with
# a strict xfail test that fails once it is fixed; only the INVALID_ARGUMENT
# expectation is waived for them, nothing else. None are open.
KNOWN_GAPS: set[tuple[str, str]] = set()


# The tests ---------------------------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(tmp_path_factory, request):
    """The world on SQLite, then on PostgreSQL (one at a time: pytest runs every
    test of the module on the first before it builds the second)."""
    w = World(tmp_path_factory.mktemp("fuzz"), request.param)
    yield w
    w.close()


def test_the_seed_gives_every_pool_rows(world):
    """Runs before the fuzzing: every kind of row exists for ids to hit."""
    pools = world.pools()
    for table in TABLE_ID_COLUMNS:
        assert pools.ids[table], table
    assert world.stored_events(graph_pb2.WatchExtractionsRequest())
    assert world.digest()["memory_usage"][0] > 0


METHOD_IDS = [f"{meth.containing_service.name}.{meth.name}" for meth in METHODS]
FUZZ_SETTINGS = dict(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)


@pytest.mark.parametrize("world", ["sqlite"], indirect=True)
@pytest.mark.parametrize("method", METHODS, ids=METHOD_IDS)
# In CI the quick run is derandomized, so a gate's verdict does not depend on
# the draw; everywhere else, and in the soak, every run explores new examples.
@settings(max_examples=QUICK_EXAMPLES, derandomize=os.environ.get("CI") == "true", **FUZZ_SETTINGS)
@given(data=st.data())
def test_random_requests_get_a_proper_status_and_write_nothing_on_failure(world, method, data):
    check_one(world, method, data)


@pytest.mark.parametrize("world", ["postgresql"], indirect=True)
@pytest.mark.parametrize("method", METHODS, ids=METHOD_IDS)
@settings(
    max_examples=QUICK_EXAMPLES_PG, derandomize=os.environ.get("CI") == "true", **FUZZ_SETTINGS
)
@given(data=st.data())
def test_random_requests_on_postgresql(world, method, data):
    """The same checks on PostgreSQL, with fewer examples per RPC (its digest
    reads every table again after each write)."""
    check_one(world, method, data)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS, ids=METHOD_IDS)
@settings(max_examples=SLOW_EXAMPLES, **FUZZ_SETTINGS)
@given(data=st.data())
def test_fuzz_soak(world, method, data):
    check_one(world, method, data)


def test_the_digest_sees_every_committed_change_and_only_those(world):
    """The oracle itself: a committed update that keeps every row count is
    seen, and a refused call leaves the digest as it was."""
    project_id = world.pools().ids["projects"][0]
    before = world.digest()
    refused = world.run(
        invoke(
            world,
            memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].methods_by_name[
                "UpdateProject"
            ],
            memory_pb2.UpdateProjectRequest(
                project=memory_pb2.Project(id=project_id, name=""), update_mask={"paths": ["name"]}
            ),
        )
    )
    assert refused.code == INVALID
    assert world.digest() == before
    renamed = memory_pb2.UpdateProjectRequest(
        project=memory_pb2.Project(id=project_id, name=f"renamed {uuid.uuid4()}"),
        update_mask={"paths": ["name"]},
    )
    world.run(_called(world.h.memory.UpdateProject, renamed))
    after = world.digest()
    assert after["projects"][0] == before["projects"][0]
    assert after["projects"][1] != before["projects"][1]


def _bad_payloads(desc: Descriptor) -> dict[str, bytes]:
    """Bytes no valid request of this type serializes to."""
    payloads = {
        "corrupt": b"\xff\xff\xff\xff\xff",
        "truncated": b"\x0a\x7fshort",
    }
    for f in desc.fields:
        if f.type == FieldDescriptor.TYPE_STRING:
            tag = bytes([(f.number << 3) | 2]) if f.number < 16 else None
            if tag is not None:
                payloads["bad utf-8"] = tag + b"\x03\xff\xfe\xfd"
            break
    for f in desc.fields:
        sub = f.message_type
        if sub is None or f.is_repeated:
            continue
        request = GetMessageClass(desc)()
        target = getattr(request, f.name)
        if sub.full_name != "google.protobuf.Struct":
            structs = [x for x in sub.fields if x.message_type is not None]
            structs = [x for x in structs if x.message_type.full_name == "google.protobuf.Struct"]
            if not structs:
                continue
            target = getattr(target, structs[0].name)
        # The protobuf library writes this, but no parser reads past 100 levels.
        for _ in range(120):
            target = target.fields["a"].struct_value
        payloads["struct nested 120 deep"] = request.SerializeToString()
        break
    return payloads


def test_request_bytes_that_do_not_decode_are_invalid_argument(world):
    wrong = {}
    before = world.digest()
    for method in METHODS:
        for name, payload in _bad_payloads(method.input_type).items():
            got = world.run(_raw_status(world.h.channel, method, payload))
            if got != INVALID:
                wrong[f"{method.name} {name}"] = got.name
    assert world.digest() == before
    assert not wrong, wrong


async def _raw_status(channel, method: MethodDescriptor, payload: bytes) -> grpc.StatusCode:
    raw = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
    try:
        if method.client_streaming:
            # A streamed item that does not decode is that item's error.
            answer = await channel.stream_unary(
                _path(method),
                request_serializer=lambda b: b,
                response_deserializer=GetMessageClass(method.output_type).FromString,
            )(iter([payload]), timeout=5)
            if method.name == "RestoreProject":
                return OK  # all or nothing: a bad item fails the call (above)
            return _CODES[answer.errors[0].code] if answer.errors else OK
        if method.server_streaming:
            async for _ in channel.unary_stream(_path(method), **raw)(payload, timeout=5):
                pass
        else:
            await channel.unary_unary(_path(method), **raw)(payload, timeout=5)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return OK


async def _called(method, request):
    return await method(request)


def _project_memory(world, title: str) -> int:
    """A new PROJECT memory's id; the call object is made inside the loop, as
    grpc.aio needs a running one."""
    create = memory_pb2.CreateMemoryRequest(
        memory=memory_pb2.Memory(
            kind=memory_pb2.MEMORY_KIND_PROJECT,
            project_id=world.pools().ids["projects"][0],
            title=title,
            content="c",
        )
    )
    return world.run(_called(world.h.memory.CreateMemory, create)).id


def test_memory_calls_by_id_refuse_a_malformed_user_id(world):
    # Its own memory: the fuzz tests before it may have deleted every seeded one.
    memory_id = _project_memory(world, "to read and update")
    wrong = {}
    for user in ("a\x00b", " alice", "x" * 201):
        doomed = _project_memory(world, "to delete")
        requests = {
            "DeleteMemory": memory_pb2.DeleteMemoryRequest(id=doomed, user_id=user),
            "GetMemory": memory_pb2.GetMemoryRequest(id=memory_id, user_id=user),
            "ListMemoryHistory": memory_pb2.ListMemoryHistoryRequest(
                memory_id=memory_id, user_id=user
            ),
            "UpdateMemory": memory_pb2.UpdateMemoryRequest(
                memory=memory_pb2.Memory(id=memory_id, title="renamed"),
                update_mask={"paths": ["title"]},
                user_id=user,
            ),
        }
        for name, request in requests.items():
            method = memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].methods_by_name[name]
            outcome = world.run(invoke(world, method, request))
            if outcome.code != INVALID:
                wrong[(name, user[:8])] = outcome.code.name
    assert not wrong, wrong
