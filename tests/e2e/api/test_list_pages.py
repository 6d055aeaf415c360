"""Every List RPC bounds its page by bytes, on both stores.

A page is bounded by ``page_size``, but a count says nothing about bytes: the
probe's eleven versions of a large memory made ``ListMemoryHistory`` answer
RESOURCE_EXHAUSTED at the default page size, where ``ListEpisodes`` returned a
shorter page and a token. Here, under a 32 KiB message limit, every List
method of the three service descriptors is walked over rows of several KB
each at the default page size: every page fits the limit, holds at least one
row, and the pages together hold every row once. A List RPC added later
fails here until it has rows to walk.

Here, each List RPC's wiring (its servicer fits its page to the server's
limit, on both stores). The cut itself (where a page is cut, that it keeps
one row, that the token resumes after the last row sent, and the walk of
large episodes) is tested on api/pages.py in tests/unit/test_convert_page_fit.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import Struct

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from tests.support import METHODS, Harness, index_idle, start_harness, wait_until

BOTH_STORES = True

LIMIT = 32 * 1024
# Several KB a row: the default page (tens of rows) cannot be one message.
BIG = "x" * 6_000
ROWS = 8


@dataclass
class Walk:
    """One List RPC's rows: the request for a page (given its token), the
    response's repeated field, and the ids it must yield."""

    request: Callable[[str], Message]
    field: str
    ids: list[int]
    key: str = "id"


async def _projects(h: Harness) -> Walk:
    ids = []
    for i in range(ROWS):
        p = await h.memory.CreateProject(
            memory_pb2.CreateProjectRequest(
                project=memory_pb2.Project(name=f"p{i}", description=BIG, notes=BIG)
            )
        )
        ids.append(p.id)
    return Walk(lambda t: memory_pb2.ListProjectsRequest(page_token=t), "projects", ids)


async def _project(h: Harness) -> int:
    p = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="big"))
    )
    return p.id


async def _sessions(h: Harness) -> Walk:
    pid = await _project(h)
    metadata = Struct()
    metadata.update({"notes": BIG})
    ids = []
    for _ in range(ROWS):
        s = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(
                session=memory_pb2.Session(project_id=pid, metadata=metadata)
            )
        )
        ids.append(s.id)
    return Walk(
        lambda t: memory_pb2.ListSessionsRequest(project_id=pid, page_token=t), "sessions", ids
    )


async def _session(h: Harness, project_id: int = 0) -> int:
    s = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project_id))
    )
    return s.id


async def _episodes(h: Harness) -> Walk:
    sid = await _session(h)
    ids = []
    for i in range(ROWS):
        e = await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=sid, user_message=f"{i} {BIG}")
        )
        ids.append(e.id)
    return Walk(
        lambda t: memory_pb2.ListEpisodesRequest(session_id=sid, page_token=t), "episodes", ids
    )


async def _memory(h: Harness, project_id: int, i: int) -> memory_pb2.Memory:
    return await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_PROJECT,
                project_id=project_id,
                title=f"port {i}",
                content=f"the database port {i} {BIG}",
            )
        )
    )


async def _memories(h: Harness) -> Walk:
    pid = await _project(h)
    ids = [(await _memory(h, pid, i)).id for i in range(ROWS)]
    scope = memory_pb2.MemoryScope(project_id=pid)
    return Walk(
        lambda t: memory_pb2.ListMemoriesRequest(scope=scope, page_token=t), "memories", ids
    )


async def _memory_history(h: Harness) -> Walk:
    """The probe's case: versions of one large memory."""
    pid = await _project(h)
    memory = await _memory(h, pid, 0)
    for i in range(ROWS):
        await h.memory.UpdateMemory(
            memory_pb2.UpdateMemoryRequest(
                memory=memory_pb2.Memory(id=memory.id, content=f"version {i} {BIG}"),
                update_mask=FieldMask(paths=["content"]),
            )
        )
    revisions = await h.app.db.read_sql(
        lambda c: [
            int(r[0])
            for r in c.execute(
                "SELECT id FROM memory_history WHERE memory_id = ? ORDER BY id", (memory.id,)
            )
        ]
    )
    return Walk(
        lambda t: memory_pb2.ListMemoryHistoryRequest(memory_id=memory.id, page_token=t),
        "revisions",
        revisions,
    )


async def _memory_usage(h: Harness) -> Walk:
    """Usage rows hold the selection's prompt (up to 2,000 characters)."""
    pid = await _project(h)
    for i in range(3):
        await _memory(h, pid, i)
    await wait_until(lambda: index_idle(h))
    scope = memory_pb2.MemoryScope(project_id=pid)
    prompt = "which database port? " + "y" * 1_990
    for n in range(4):
        request = memory_pb2.SelectMemoriesRequest(
            prompt=prompt, scope=scope, thread_id="t1", request_id=f"select-{n}"
        )
        assert len([x async for x in h.memory.SelectMemories(request)]) == 3
    usage = await h.app.db.read_sql(
        lambda c: [int(r[0]) for r in c.execute("SELECT id FROM memory_usage ORDER BY id")]
    )
    assert len(usage) == 12
    return Walk(
        lambda t: memory_pb2.ListMemoryUsageRequest(thread_id="t1", project_id=pid, page_token=t),
        "usage",
        usage,
    )


async def _entities(h: Harness) -> Walk:
    pid = await _project(h)
    ids = []
    for i in range(ROWS):
        e = await h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(
                name=f"Thing {i}", type="concept", notes=BIG, project_id=pid
            )
        )
        ids.append(e.id)
    return Walk(
        lambda t: graph_pb2.ListEntitiesRequest(project_id=pid, page_token=t), "entities", ids
    )


async def _relationships(h: Harness) -> Walk:
    pid = await _project(h)
    hub = await h.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="Hub", type="concept", project_id=pid)
    )
    ids = []
    for i in range(ROWS):
        spoke = await h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name=f"Spoke {i}", type="concept", project_id=pid)
        )
        r = await h.graph.UpsertRelationship(
            graph_pb2.UpsertRelationshipRequest(
                from_id=hub.id, to_id=spoke.id, label="links_to", notes=BIG
            )
        )
        ids.append(r.id)
    return Walk(
        lambda t: graph_pb2.ListRelationshipsRequest(entity_id=hub.id, page_token=t),
        "relationships",
        ids,
    )


async def _entity_aliases(h: Harness) -> Walk:
    """Aliases are names (at most 200 characters), so a page of them is
    bounded by its size before its bytes: enough of them to need two pages."""
    pid = await _project(h)
    words = " ".join(["Very Long Named Thing"] * 8).split()
    seps = [" ", "-", ",", ";", "/", "+", "=", "|", "~", "!", "*", "^", "%"]
    entity_id = 0
    for i in range(60):
        # Spellings of one name (its words joined by other punctuation): one
        # entity, one alias each.
        a, b = seps[i % len(seps)], seps[i // len(seps)]
        name = "".join(w + (a if k % 2 else b) for k, w in enumerate(words)).rstrip(a + b)
        e = await h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name=name, type="concept", project_id=pid)
        )
        entity_id = e.id
    rows = (
        await h.graph.ListEntityAliases(
            graph_pb2.ListEntityAliasesRequest(entity_id=entity_id, page_size=1000)
        )
    ).aliases
    assert len(rows) > 50
    return Walk(
        lambda t: graph_pb2.ListEntityAliasesRequest(entity_id=entity_id, page_token=t),
        "aliases",
        [hash(a.name) for a in rows],
        key="name_hash",
    )


async def _merges(h: Harness) -> Walk:
    pid = await _project(h)
    target = await h.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="Target", type="concept", project_id=pid)
    )
    ids = []
    # A reason is at most 1,000 characters: forty of them pass the limit.
    for i in range(40):
        source = await h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name=f"Source {i}", type="concept", project_id=pid)
        )
        merge = await h.graph.MergeEntities(
            graph_pb2.MergeEntitiesRequest(
                target_id=target.id, source_ids=[source.id], reason=BIG[:1000]
            )
        )
        ids.append(merge.id)
    return Walk(lambda t: graph_pb2.ListMergesRequest(project_id=pid, page_token=t), "merges", ids)


async def _summaries(h: Harness) -> Walk:
    sid = await _session(h)
    ids = []
    for i in range(ROWS):
        s = await h.summary.CreateSummary(
            summary_pb2.CreateSummaryRequest(
                summary=summary_pb2.Summary(session_id=sid, content=f"{i} {BIG}")
            )
        )
        ids.append(s.id)
    return Walk(
        lambda t: summary_pb2.ListSummariesRequest(session_id=sid, page_token=t),
        "summaries",
        ids,
    )


async def _erasures(h: Harness) -> Walk:
    """A receipt holds counts and times only, a few hundred bytes whatever the
    user held: pages of three, so that the walk pages on."""
    ids = []
    for i in range(ROWS):
        await h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_USER, user_id=f"u{i}", title="t", content=BIG
                )
            )
        )
        erasure = await h.memory.ForgetUser(memory_pb2.ForgetUserRequest(user_id=f"u{i}"))
        ids.append(erasure.id)
    return Walk(
        lambda t: memory_pb2.ListErasuresRequest(page_size=3, page_token=t), "erasures", ids
    )


WALKS: dict[str, Callable[[Harness], Awaitable[Walk]]] = {
    "ListProjects": _projects,
    "ListSessions": _sessions,
    "ListEpisodes": _episodes,
    "ListMemories": _memories,
    "ListMemoryHistory": _memory_history,
    "ListMemoryUsage": _memory_usage,
    "ListEntities": _entities,
    "ListRelationships": _relationships,
    "ListEntityAliases": _entity_aliases,
    "ListMerges": _merges,
    "ListSummaries": _summaries,
    "ListErasures": _erasures,
}
LISTS = [(service, method) for service, method in METHODS if method.name.startswith("List")]


def test_every_list_rpc_is_walked():
    assert {m.name for _, m in LISTS} == set(WALKS), "add a walk for each new List RPC"


@pytest.fixture
async def small(tmp_path, store_settings):
    h = await start_harness(tmp_path / "data", max_message_bytes=LIMIT, **store_settings)
    yield h
    await h.close()


@pytest.mark.parametrize("name", sorted(WALKS))
async def test_a_list_page_of_large_rows_fits_the_message_limit_and_pages_on(small, name):
    h = small
    walk = await WALKS[name](h)
    service = {"graph": h.graph, "summary": h.summary}
    stub = next(
        service.get(s.full_name.split(".")[1], h.memory) for s, m in LISTS if m.name == name
    )
    rpc = getattr(stub, name)
    seen: list[int] = []
    token, pages = "", 0
    while True:
        page = await rpc(walk.request(token))
        assert page.ByteSize() <= LIMIT
        rows = list(getattr(page, walk.field))
        assert rows, "a page holds at least one row"
        seen += [hash(r.name) if walk.key == "name_hash" else getattr(r, walk.key) for r in rows]
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert pages > 1, "rows of this size cannot all fit one page"
    assert sorted(seen) == sorted(walk.ids) and len(seen) == len(set(seen))
