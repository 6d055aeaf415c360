"""Tenants, proved on every method of the three service descriptors.

Alice's key (tenant "orchestrator") builds one of every resource kind: a
project, a session in it and one outside any project, episodes, PROJECT and
USER memories, usage, summaries and an overview, entities, a relationship and
an extraction event.  Every text holds the marker ``zebra``.

A rival key of another tenant, allowed to act for the same users (so only the
tenant stands in its way), then calls every method, once per resource kind
the request can name (and once with all of them).  Each answer must be
exactly the answer for an id that does not exist (same status, same message
up to the number), no answer may carry the marker, and no row outside the
rival's own tenant may change (per-table digests).  Because the list comes
from the descriptors, a new RPC is walked as soon as it is added.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
from pathlib import Path

import grpc
import grpc.aio
import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.rpc.auth import ADMIN_METHODS
from nexus_grpc.store import extraction_events as event_store
from nexus_grpc.store import memories as memory_store
from tests.support import METHODS, bearer, erasure_done, start_harness, wait_until

# Every harness test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

ALICE_KEY = "alice-orchestrator-key-0001"
RIVAL_KEY = "rival-tenant-key-000000001"
ADMIN_KEY = "ops-admin-key-000000000001"
BOB_ONLY_KEY = "bob-only-key-0000000000001"
S1_EXT = "5e7a0000-0000-4000-8000-000000000001"
S2_EXT = "5e7a0000-0000-4000-8000-000000000002"
MARKER = "zebra"
MISSING = 900_000  # ids above every id this test creates
WATCH_SECONDS = 1.5

# Fields that name a resource, and which resource.
ID_FIELDS = {
    "project_id": "project",
    "session_id": "session",
    "episode_id": "episode",
    "memory_id": "memory",
    "entity_id": "entity",
    "from_id": "entity",
    "to_id": "entity2",
    "entity_ids": "entity",
    "external_id": "external_id",
    "thread_id": "thread",
    "merge_id": "merge",
    "target_id": "entity",
    "source_ids": "entity2",
}
# ``id`` names the resource of its message (or of the method, at the top).
KIND_OF_MESSAGE = {
    "Project": "project",
    "Session": "session",
    "Memory": "memory",
    "Summary": "summary",
}
UPDATE_PATHS = {
    "UpdateProject": "name",
    "UpdateSession": "name",
    "UpdateMemory": "title",
    "UpdateSummary": "content",
}
FILTERS = {("ListEntities", "name")}
_CREATED = itertools.count(1)
TEXT = {
    "name": "rival name",
    "query": MARKER,
    "prompt": "crossed",  # stored as usage context: must not carry the marker
    "title": "rival title",
    "content": "rival content",
    "user_message": "rival message",
    "label": "knows",
    "type": "person",
    "user_id": "alice",
}


def key_file(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": ALICE_KEY, "name": "orchestrator", "users": ["alice", "bob"]},
                    # Same users, another tenant: only the tenant can stop it.
                    {"key": RIVAL_KEY, "name": "rival", "users": ["alice", "bob"]},
                    {"key": ADMIN_KEY, "name": "ops", "users": [], "admin": True},
                    # Alice's tenant, but may act only for bob.
                    {
                        "key": BOB_ONLY_KEY,
                        "name": "bob-service",
                        "users": ["bob"],
                        "tenant": "orchestrator",
                    },
                ]
            }
        )
    )
    return path


@pytest.fixture
async def world(tmp_path, store_settings):
    h = await start_harness(
        tmp_path / "data", auth_keys_file=str(key_file(tmp_path / "k.json")), **store_settings
    )
    try:
        await _populate(h)
        yield h
    finally:
        await h.close()


async def _populate(h) -> None:
    a = bearer(ALICE_KEY)
    mem, gr, summ = h.memory, h.graph, h.summary
    project = await mem.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name=f"{MARKER} project")),
        metadata=a,
    )
    s1 = await mem.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(external_id=S1_EXT, name=MARKER, project_id=project.id)
        ),
        metadata=a,
    )
    s2 = await mem.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(external_id=S2_EXT, name=MARKER)
        ),
        metadata=a,
    )
    episodes = [
        await mem.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=sid, user_message=f"the {MARKER} crossed", ai_response=MARKER
            ),
            metadata=a,
        )
        for sid in (s1.id, s2.id)
    ]
    memories = [
        await mem.CreateMemory(memory_pb2.CreateMemoryRequest(memory=memory), metadata=a)
        for memory in (
            memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_PROJECT,
                title=MARKER,
                content=MARKER,
                project_id=project.id,
            ),
            memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER, title=MARKER, content=MARKER, user_id="alice"
            ),
            memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER,
                title=MARKER,
                content=MARKER,
                user_id="alice",
                project_id=project.id,
            ),
        )
    ]
    summary = await summ.CreateSummary(
        summary_pb2.CreateSummaryRequest(
            summary=summary_pb2.Summary(session_id=s1.id, content=MARKER)
        ),
        metadata=a,
    )
    await summ.CreateSummary(
        summary_pb2.CreateSummaryRequest(
            summary=summary_pb2.Summary(project_id=project.id, content=MARKER)
        ),
        metadata=a,
    )
    e1, e2 = [
        await gr.UpsertEntity(
            graph_pb2.UpsertEntityRequest(
                name=f"{MARKER} {n}", type="person", project_id=project.id
            ),
            metadata=a,
        )
        for n in (1, 2)
    ]
    await gr.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name=f"{MARKER} 3", type="person", session_id=s2.id),
        metadata=a,
    )
    # A merge, so that ListMerges and UndoMerge have one of Alice's to find.
    folded = await gr.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name=f"{MARKER} 4", type="person", project_id=project.id),
        metadata=a,
    )
    merge = await gr.MergeEntities(
        graph_pb2.MergeEntitiesRequest(target_id=e2.id, source_ids=[folded.id], reason=MARKER),
        metadata=a,
    )
    await gr.UpsertRelationship(
        graph_pb2.UpsertRelationshipRequest(
            from_id=e1.id, to_id=e2.id, label="knows", notes=MARKER
        ),
        metadata=a,
    )
    # An extraction outcome and a selection's usage, written as their
    # workers write them (no model runs in this harness).
    await h.app.db.write_sql(
        lambda c: event_store.SqlExtractionEvents(c).insert(
            episodes[0].id, s1.id, project.id, event_store.DONE, payload={"note": MARKER}
        )
    )
    await h.app.db.write_sql(
        lambda c: memory_store.MemoryRows(c).record_usage(
            "alice-thread",
            memory_store.UsageOwner("alice", 0),
            MARKER,
            [memory_store.UsageRecord(memories[1].id, 0.9, 1)],
        )
    )

    async def indexed() -> bool:
        n = await h.app.db.read_sql(
            lambda c: c.execute("SELECT COUNT(*) FROM jobs WHERE kind LIKE 'index:%'").fetchone()
        )
        return n[0] == 0

    await wait_until(indexed, timeout=60)
    ids = {
        "project": project.id,
        "session": s1.id,
        "loose_session": s2.id,
        "episode": episodes[0].id,
        "memory": memories[1].id,
        "entity": e1.id,
        "entity2": e2.id,
        "summary": summary.id,
        "external_id": s1.external_id,
        "thread": "alice-thread",
        "merge": merge.id,
    }
    h.extras["ids"] = ids


def _missing(ids: dict) -> dict:
    return {
        k: (
            "5e7a0000-0000-4000-8000-0000000009ff"
            if k == "external_id"
            else f"missing-{k}"
            if isinstance(v, str)
            else MISSING + i
        )
        for i, (k, v) in enumerate(ids.items())
    }


def _resource_of(method_name: str) -> str:
    for suffix, kind in (
        ("Project", "project"),
        ("Session", "session"),
        ("Episode", "episode"),
        ("Memory", "memory"),
        ("Entity", "entity"),
        ("Summary", "summary"),
    ):
        if method_name.endswith(suffix):
            return kind
    return ""


def _fill(message: Message, method, ids: dict, only: str | None, top: bool = True) -> set[str]:
    """Fill the request; returns the id fields it set.  ``only`` names the one
    id field to set (None: all)."""
    used: set[str] = set()
    for f in message.DESCRIPTOR.fields:
        name = f.name
        if f.message_type is not None:
            if f.message_type.full_name == "google.protobuf.FieldMask":
                path = UPDATE_PATHS.get(method.name)
                if path:
                    getattr(message, name).paths.append(path)
            elif f.message_type.full_name.startswith("nexus.") and not f.is_repeated:
                used |= _fill(getattr(message, name), method, ids, only, top=False)
            continue
        kind = None
        if name == "id":
            kind = (
                _resource_of(method.name)
                if top
                else KIND_OF_MESSAGE.get(message.DESCRIPTOR.name, "")
            )
        elif name in ID_FIELDS:
            kind = ID_FIELDS[name]
            # The graph of a session outside any project is the loose session's.
            if kind == "session" and method.full_name.startswith("nexus.graph"):
                kind = "loose_session"
        if kind:
            key = f"{message.DESCRIPTOR.name}.{name}"
            if only is not None and only != key:
                continue
            value = ids.get(kind)
            if value is None:
                continue
            if f.is_repeated:
                getattr(message, name).append(value)
            else:
                setattr(message, name, value)
            used.add(key)
        elif (method.name, name) in FILTERS:
            continue  # a filter set to text of its own would hide what it filters
        elif f.type == FieldDescriptor.TYPE_STRING and name in TEXT:
            text = TEXT[name]
            if (method.name, name) == ("CreateProject", "name"):
                # A name is unique in its tenant: each create names a project of its own.
                text = f"{text} {next(_CREATED)}"
            setattr(message, name, text)
        elif name == "request_id" and method.name == "ImportEpisodes":
            # Required by an import: without it both calls would stop at validation.
            setattr(message, name, "rival-import")
        elif name in ("depth", "limit"):
            setattr(message, name, 1 if name == "depth" else 5)
        elif name == "kind" and f.enum_type is not None:
            setattr(message, name, 2)  # USER
    return used


def requests_for(method, ids: dict) -> list[tuple[str, Message, Message]]:
    """(variant, request naming Alice's resources, the same naming missing ones)."""
    cls = GetMessageClass(method.input_type)
    probe = cls()
    keys = sorted(_fill(probe, method, ids, None))
    out = []
    for only in [None, *keys] if keys else [None]:
        real, twin = cls(), cls()
        _fill(real, method, ids, only)
        _fill(twin, method, _missing(ids), only)
        out.append((only or "all", real, twin))
    return out


async def answer(channel, service, method, request, key) -> tuple[str, str, list[bytes]]:
    """(status name, details, serialised responses) of one call."""
    path = f"/{service.full_name}/{method.name}"
    response_class = GetMessageClass(method.output_type)
    kw = dict(
        request_serializer=type(request).SerializeToString,
        response_deserializer=response_class.FromString,
    )
    watch = method.name == "WatchExtractions"
    got: list[bytes] = []
    try:
        if method.server_streaming:
            call = channel.unary_stream(path, **kw)(
                request, metadata=bearer(key), timeout=WATCH_SECONDS if watch else 20
            )
            async for item in call:
                got.append(item.SerializeToString())
        elif method.client_streaming:
            reply = await channel.stream_unary(path, **kw)(
                iter([request]), metadata=bearer(key), timeout=20
            )
            got.append(reply.SerializeToString())
            if reply.errors:
                # One item: its error is what the call would have said alone.
                item = reply.errors[0]
                return _CODES[item.code].name, item.message, got
        else:
            reply = await channel.unary_unary(path, **kw)(request, metadata=bearer(key), timeout=20)
            got.append(reply.SerializeToString())
    except grpc.aio.AioRpcError as exc:
        if watch and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return "OPEN", "", got  # a live stream that sent what it had
        return exc.code().name, exc.details() or "", got
    return "OK", "", got


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def _shape(details: str) -> str:
    return re.sub(r"missing-[a-z_]+|'[^']*'|\d+", "#", details)


TENANT_ROWS = {
    # Every row that is not the rival's own: the rival may create in its
    # own tenant, and must change nothing else.
    "projects": "SELECT * FROM projects WHERE tenant != 'rival'",
    "sessions": "SELECT * FROM sessions WHERE tenant != 'rival'",
    "episodes": "SELECT e.* FROM episodes e JOIN sessions s ON s.id = e.session_id"
    " WHERE s.tenant != 'rival'",
    "summaries": "SELECT * FROM summaries WHERE COALESCE((SELECT tenant FROM sessions"
    " WHERE id = summaries.session_id), (SELECT tenant FROM projects"
    " WHERE id = summaries.project_id)) != 'rival'",
    "entities": "SELECT * FROM entities WHERE tenant != 'rival'",
    "relationships": "SELECT r.* FROM relationships r JOIN entities e ON e.id = r.from_id"
    " WHERE e.tenant != 'rival'",
    "entity_episodes": "SELECT * FROM entity_episodes",
    "entity_aliases": "SELECT a.* FROM entity_aliases a JOIN entities e ON e.id = a.entity_id"
    " WHERE e.tenant != 'rival'",
    "relationship_evidence": "SELECT v.* FROM relationship_evidence v"
    " JOIN entities e ON e.id = v.from_id WHERE e.tenant != 'rival'",
    "entity_merges": "SELECT * FROM entity_merges WHERE tenant != 'rival'",
    "memories": "SELECT * FROM memories WHERE tenant != 'rival'",
    "memory_usage": "SELECT * FROM memory_usage WHERE tenant != 'rival'",
    "memory_selections": "SELECT * FROM memory_selections WHERE tenant != 'rival'",
    "extraction_events": "SELECT * FROM extraction_events WHERE tenant != 'rival'",
}


async def digests(h) -> dict[str, str]:
    def read(conn):
        return {
            table: hashlib.sha256(
                repr(sorted(tuple(r) for r in conn.execute(sql).fetchall())).encode()
            ).hexdigest()
            for table, sql in TENANT_ROWS.items()
        }

    return await h.app.db.read_sql_in_transaction(read)


READS = {
    "GetProject",
    "GetSession",
    "GetEpisode",
    "ListEpisodes",
    "SearchEpisodes",
    "GetMemory",
    "ListMemories",
    "SearchMemories",
    "ListMemoryUsage",
    "GetEntity",
    "ListEntities",
    "ListRelationships",
    "ListEntityAliases",
    "ListMerges",
    "GetNeighborhood",
    "GetNeighbors",
    "SearchEntities",
    "GetSummary",
    "ListSummaries",
    "GetProjectOverview",
    "WatchExtractions",
    "ListProjects",
    "ListSessions",
    "ExportProject",
}


async def test_the_owner_sees_its_data_on_every_read(world):
    """The positive case: the same requests with Alice's key return her data."""
    h, ids = world, world.extras["ids"]
    seen = set()
    for service, method in METHODS:
        if method.name not in READS:
            continue
        for _, real, _ in requests_for(method, ids):
            code, _, got = await answer(h.channel, service, method, real, ALICE_KEY)
            # An event carries ids and found entities, not the episode's text.
            if any(MARKER.encode() in b for b in got) or (
                method.name == "WatchExtractions" and got
            ):
                seen.add(method.name)
    assert seen == READS, READS - seen


async def test_another_tenant_gets_what_a_missing_id_gets_on_every_method(world):
    h, ids = world, world.extras["ids"]
    before = await digests(h)
    walked = 0
    wrong = []
    for service, method in METHODS:
        if f"/{service.full_name}/{method.name}" in ADMIN_METHODS:
            continue  # admin-only: refused before any tenant applies
        for variant, real, twin in requests_for(method, ids):
            got = await answer(h.channel, service, method, real, RIVAL_KEY)
            missing = await answer(h.channel, service, method, twin, RIVAL_KEY)
            walked += 1
            leaked = [b for b in got[2] if MARKER.encode() in b] or MARKER in got[1]
            if method.name == "GetServiceStatus":
                same = got[0] == missing[0] == "OK"  # no tenant data in it
            else:
                same = (got[0], _shape(got[1]), len(got[2])) == (
                    missing[0],
                    _shape(missing[1]),
                    len(missing[2]),
                )
            if leaked or not same:
                wrong.append((method.name, variant, got[:2], missing[:2], bool(leaked)))
    assert not wrong, "\n".join(map(str, wrong))
    assert walked > 80
    assert await digests(h) == before


async def test_admin_sees_every_tenant_and_the_rival_lists_nothing(world):
    h, ids = world, world.extras["ids"]
    got = await h.memory.GetEpisode(
        memory_pb2.GetEpisodeRequest(id=ids["episode"]), metadata=bearer(ADMIN_KEY)
    )
    assert MARKER in got.user_message
    listed = await h.memory.ListSessions(
        memory_pb2.ListSessionsRequest(), metadata=bearer(RIVAL_KEY)
    )
    assert list(listed.sessions) == []
    mine = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(external_id=S1_EXT)),
        metadata=bearer(RIVAL_KEY),
    )
    # External ids are per tenant: the rival's S1_EXT is its own session.
    assert mine.id != ids["session"]
    again = await h.memory.GetSession(
        memory_pb2.GetSessionRequest(external_id=S1_EXT), metadata=bearer(RIVAL_KEY)
    )
    assert again.id == mine.id
    listed = await h.memory.ListSessions(
        memory_pb2.ListSessionsRequest(), metadata=bearer(RIVAL_KEY)
    )
    assert [x.id for x in listed.sessions] == [mine.id]
    everyone = await h.memory.ListSessions(
        memory_pb2.ListSessionsRequest(), metadata=bearer(ADMIN_KEY)
    )
    assert len(everyone.sessions) == 3


async def test_delete_project_refuses_while_other_users_memories_remain(world):
    """The cascade must not bypass USER-memory ownership (DeleteMemory's rule)."""
    h, ids = world, world.extras["ids"]
    before = await digests(h)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.DeleteProject(
            memory_pb2.DeleteProjectRequest(id=ids["project"]), metadata=bearer(BOB_ONLY_KEY)
        )
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "1 of users this key may not act for" in err.value.details()
    assert "alice" not in err.value.details()  # names only users the key may act for
    assert await digests(h) == before
    # A key that may act for every owner deletes the project with them.
    deleted = await h.memory.DeleteProject(
        memory_pb2.DeleteProjectRequest(id=ids["project"]), metadata=bearer(ALICE_KEY)
    )
    await erasure_done(h, deleted.erasure_id, metadata=bearer(ALICE_KEY))
    left = await h.app.db.read_sql(
        lambda c: c.execute("SELECT project_id, user_id FROM memories ORDER BY id").fetchall()
    )
    assert [tuple(r) for r in left] == [(0, "alice")]  # the USER memory outside it stays


async def test_an_unfiltered_watch_hears_only_its_tenant(world):
    h, ids = world, world.extras["ids"]
    rival = h.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(), metadata=bearer(RIVAL_KEY)
    )
    alice = h.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(), metadata=bearer(ALICE_KEY)
    )
    first = await asyncio.wait_for(alice.read(), 10)
    assert first.episode_id == ids["episode"]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(rival.read(), WATCH_SECONDS)
    rival.cancel()
    alice.cancel()
