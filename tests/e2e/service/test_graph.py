"""GraphService CRUD, traversal and entity search over a real gRPC channel:
one test per RPC path for the wiring (status codes, pages, the vector index,
the store's own edge guard). The rules behind them are decided on the unit
tier's fakes: tests/unit/test_graph_entities.py and test_graph_relationships.py."""

from __future__ import annotations

import grpc
import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.graph import Interval
from nexus_grpc.core.storage import Conflict
from nexus_grpc.core.tenancy import DEFAULT_TENANT
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.store import graph_evidence
from tests.graph_support import expect_status, new_project
from tests.support import wait_until

# Every test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
FAILED = grpc.StatusCode.FAILED_PRECONDITION


async def entity(h, name: str, etype: str = "concept", **kw) -> graph_pb2.Entity:
    return await h.graph.UpsertEntity(graph_pb2.UpsertEntityRequest(name=name, type=etype, **kw))


async def edge(
    h, a: int, b: int, label: str = "related_to", notes: str = ""
) -> graph_pb2.Relationship:
    return await h.graph.UpsertRelationship(
        graph_pb2.UpsertRelationshipRequest(from_id=a, to_id=b, label=label, notes=notes)
    )


# Entities ---------------------------------------------------------------------


async def test_entity_upsert_get_and_mention_counts(harness):
    first = await entity(harness, "  PostgreSQL ", "Technology", notes="a database")
    assert first.name == "PostgreSQL" and first.type == "technology"
    assert first.mention_count == 1 and first.confidence == 1.0
    assert first.source == graph_pb2.ENTITY_SOURCE_MANUAL and first.create_time.seconds > 0
    again = await entity(harness, "PostgreSQL", "technology", confidence=0.5)
    assert again.id == first.id and again.mention_count == 2
    assert again.notes == "a database" and again.confidence == 0.5
    got = await harness.graph.GetEntity(graph_pb2.GetEntityRequest(id=first.id))
    assert got == again


async def test_entity_errors(harness):
    graph = harness.graph
    await expect_status(entity(harness, "x", "date"), INVALID, "type")
    await expect_status(
        entity(harness, "x", "person", project_id=77), grpc.StatusCode.FAILED_PRECONDITION, "77"
    )
    await expect_status(graph.GetEntity(graph_pb2.GetEntityRequest(id=0)), INVALID, "id")
    await expect_status(graph.GetEntity(graph_pb2.GetEntityRequest(id=42)), NOT_FOUND, "42")
    await expect_status(graph.DeleteEntity(graph_pb2.DeleteEntityRequest(id=0)), INVALID, "id")
    await expect_status(graph.DeleteEntity(graph_pb2.DeleteEntityRequest(id=42)), NOT_FOUND, "42")
    listed = await graph.ListEntities(graph_pb2.ListEntitiesRequest())
    assert list(listed.entities) == []  # rejected requests wrote nothing


async def test_list_entities_by_type_and_project_paginated(harness):
    p1, p2 = await new_project(harness, "one"), await new_project(harness, "two")
    for i in range(5):
        await entity(harness, f"P{i}", "person", project_id=p1.id)
    await entity(harness, "Tool", "technology", project_id=p1.id)
    await entity(harness, "Other", "person", project_id=p2.id)

    names, token = [], ""
    while True:
        page = await harness.graph.ListEntities(
            graph_pb2.ListEntitiesRequest(
                type="person", project_id=p1.id, page_size=2, page_token=token
            )
        )
        names += [e.name for e in page.entities]
        token = page.next_page_token
        if not token:
            break
    assert names == ["P0", "P1", "P2", "P3", "P4"]
    await expect_status(
        harness.graph.ListEntities(graph_pb2.ListEntitiesRequest(page_token="junk")),
        INVALID,
        "page_token",
    )


async def test_delete_entity_removes_edges_and_vector_point(harness):
    a, b, c = [await entity(harness, n) for n in "abc"]
    await edge(harness, a.id, b.id)
    await edge(harness, c.id, a.id)
    await edge(harness, b.id, c.id)
    index = harness.app.index
    await wait_until(lambda: _has_points(index, [a.id, b.id, c.id]))
    resp = await harness.graph.DeleteEntity(graph_pb2.DeleteEntityRequest(id=a.id))
    assert resp.deleted_relationships == 2
    await expect_status(harness.graph.GetEntity(graph_pb2.GetEntityRequest(id=a.id)), NOT_FOUND)
    rels = await harness.graph.ListRelationships(
        graph_pb2.ListRelationshipsRequest(entity_id=b.id, include_inbound=True)
    )
    assert [(r.from_id, r.to_id) for r in rels.relationships] == [(b.id, c.id)]

    async def point_gone():
        return await index.retrieve_ids("entities", [a.id]) == set()

    await wait_until(point_gone)


async def _has_points(index, ids) -> bool:
    return await index.retrieve_ids("entities", ids) == set(ids)


async def test_entity_writes_queue_the_index_job_their_vector_needs(harness):
    """New notes and a delete each queue the entity's index job with the write
    (the domain decides it, domain/entity_writes.py), the delete's while the
    row is there, in its tenant; a mention that changes nothing its vector is
    made from queues none."""
    h = harness
    for worker in h.app.workers:
        if worker.kind == jobs.INDEX_ENTITY:
            await worker.stop()  # the jobs stay to be read

    async def queued() -> list[tuple]:
        def take(c):
            rows = c.execute(
                "SELECT target_id, tenant FROM jobs WHERE kind = ? AND state = 'pending'",
                (jobs.INDEX_ENTITY,),
            ).fetchall()
            c.execute("DELETE FROM jobs WHERE kind = ?", (jobs.INDEX_ENTITY,))
            return [tuple(r) for r in rows]

        return await h.app.db.write_sql(take)

    ada = await entity(h, "Ada", "person")
    await queued()
    await entity(h, "Ada", "person", notes="wrote the first program")
    assert await queued() == [(ada.id, DEFAULT_TENANT)]
    await entity(h, "Ada", "person")
    assert await queued() == []
    await h.graph.DeleteEntity(graph_pb2.DeleteEntityRequest(id=ada.id))
    assert await queued() == [(ada.id, DEFAULT_TENANT)]


# Relationships ------------------------------------------------------------------


async def test_relationship_upsert_list_and_delete(harness):
    a, b, c = [await entity(harness, n) for n in "abc"]
    r1 = await edge(harness, a.id, b.id, "Works With", "colleagues")
    assert r1.label == "works_with" and r1.mention_count == 1 and r1.notes == "colleagues"
    r1b = await edge(harness, a.id, b.id, "worksWith")
    assert r1b.id == r1.id and r1b.mention_count == 2 and r1b.notes == "colleagues"
    r2 = await edge(harness, c.id, a.id, "knows")

    out = await harness.graph.ListRelationships(graph_pb2.ListRelationshipsRequest(entity_id=a.id))
    assert [r.id for r in out.relationships] == [r1.id]
    both = await harness.graph.ListRelationships(
        graph_pb2.ListRelationshipsRequest(entity_id=a.id, include_inbound=True)
    )
    assert [r.id for r in both.relationships] == [r1.id, r2.id]

    first = await harness.graph.ListRelationships(
        graph_pb2.ListRelationshipsRequest(entity_id=a.id, include_inbound=True, page_size=1)
    )
    rest = await harness.graph.ListRelationships(
        graph_pb2.ListRelationshipsRequest(
            entity_id=a.id, include_inbound=True, page_size=1, page_token=first.next_page_token
        )
    )
    assert [r.id for r in [*first.relationships, *rest.relationships]] == [r1.id, r2.id]

    await harness.graph.DeleteRelationship(
        graph_pb2.DeleteRelationshipRequest(from_id=a.id, to_id=b.id, label="works with")
    )
    out = await harness.graph.ListRelationships(graph_pb2.ListRelationshipsRequest(entity_id=a.id))
    assert list(out.relationships) == []


async def test_relationship_errors(harness):
    a, b = await entity(harness, "a"), await entity(harness, "b")
    graph = harness.graph
    await expect_status(edge(harness, 0, b.id), INVALID, "from_id")
    await expect_status(edge(harness, 99, b.id), NOT_FOUND, "from_id")
    elsewhere = await entity(harness, "b", project_id=(await new_project(harness)).id)
    assert elsewhere.id != b.id  # same name and type, another project
    await expect_status(edge(harness, a.id, elsewhere.id), FAILED, "one project")
    with pytest.raises(Conflict, match="different graphs"):  # the store's own guard
        await harness.app.db.write_sql(
            lambda c: graph_evidence.EvidenceRows(c).write_intervals(
                elsewhere.id, "x", [Interval(a.id, 1.0)]
            )
        )
    await expect_status(
        graph.ListRelationships(graph_pb2.ListRelationshipsRequest(entity_id=0)),
        INVALID,
        "entity_id",
    )
    await expect_status(
        graph.ListRelationships(graph_pb2.ListRelationshipsRequest(entity_id=99)), NOT_FOUND, "99"
    )
    await expect_status(
        graph.DeleteRelationship(
            graph_pb2.DeleteRelationshipRequest(from_id=a.id, to_id=b.id, label="x")
        ),
        NOT_FOUND,
    )
    await expect_status(
        graph.DeleteRelationship(
            graph_pb2.DeleteRelationshipRequest(from_id=-1, to_id=b.id, label="x")
        ),
        INVALID,
        "from_id",
    )


# Traversal ----------------------------------------------------------------------


async def cyclic_graph(h) -> dict[str, int]:
    """a -> b -> c -> a (a cycle), c -> d, e -> d, e -> f, and an island z."""
    ids = {n: (await entity(h, n)).id for n in "abcdefz"}
    for x, y in ["ab", "bc", "ca", "cd", "ed", "ef"]:
        await edge(h, ids[x], ids[y])
    return ids


def names(sub: graph_pb2.Subgraph, ids: dict[str, int]) -> set[str]:
    back = {v: k for k, v in ids.items()}
    return {back[n.id] for n in sub.nodes}


def edge_names(sub: graph_pb2.Subgraph, ids: dict[str, int]) -> set[str]:
    back = {v: k for k, v in ids.items()}
    return {back[e.from_id] + back[e.to_id] for e in sub.edges}


async def test_neighborhood_and_neighbors_answer_subgraphs(harness):
    ids = await cyclic_graph(harness)
    hood = await harness.graph.GetNeighborhood(
        graph_pb2.GetNeighborhoodRequest(entity_id=ids["a"], depth=2)
    )
    assert names(hood, ids) == {"a", "b", "c", "d"}
    assert edge_names(hood, ids) == {"ab", "bc", "ca", "cd"}
    await expect_status(
        harness.graph.GetNeighborhood(graph_pb2.GetNeighborhoodRequest(entity_id=1, depth=4)),
        INVALID,
        "depth",
    )
    await expect_status(
        harness.graph.GetNeighborhood(graph_pb2.GetNeighborhoodRequest(entity_id=999)),
        NOT_FOUND,
        "999",
    )
    sub = await harness.graph.GetNeighbors(
        graph_pb2.GetNeighborsRequest(entity_ids=[ids["b"], ids["f"], ids["b"]])
    )
    assert names(sub, ids) == {"a", "b", "c", "e", "f"}
    assert edge_names(sub, ids) == {"ab", "bc", "ca", "ef"}
    await expect_status(
        harness.graph.GetNeighbors(graph_pb2.GetNeighborsRequest()), INVALID, "entity_ids"
    )
    await expect_status(
        harness.graph.GetNeighbors(graph_pb2.GetNeighborsRequest(entity_ids=[ids["a"], 555])),
        NOT_FOUND,
        "555",
    )


# Entity search ------------------------------------------------------------------


async def test_entity_search_is_scoped_to_its_project(harness):
    p1, p2 = await new_project(harness, "one"), await new_project(harness, "two")
    mine = await entity(harness, "Postgres database", "technology", project_id=p1.id)
    await entity(harness, "Redis cache", "technology", project_id=p1.id)
    theirs = await entity(harness, "Postgres cluster", "technology", project_id=p2.id)
    # Same name and type in both projects: two entities, one per project.
    shared = await entity(harness, "Postgres", "technology", project_id=p1.id)
    twin = await entity(harness, "Postgres", "technology", project_id=p2.id)
    assert twin.id != shared.id and (shared.project_id, twin.project_id) == (p1.id, p2.id)
    everyone = [mine.id, theirs.id, shared.id, twin.id]
    await wait_until(lambda: _has_points(harness.app.index, everyone))

    async def search(project_id: int, query: str = "Postgres database", limit: int = 10):
        call = harness.graph.SearchEntities(
            graph_pb2.SearchEntitiesRequest(query=query, project_id=project_id, limit=limit)
        )
        return [hit async for hit in call]

    hits = await search(p1.id)
    found = [h.entity.id for h in hits]
    assert found[0] == mine.id and theirs.id not in found and shared.id in found
    assert twin.id not in found
    assert all(h.entity.project_id == p1.id for h in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)
    assert len(await search(p1.id, limit=1)) == 1
    other = await search(p2.id)
    assert {h.entity.id for h in other} == {theirs.id, twin.id}
    assert all(h.entity.project_id == p2.id for h in other)

    await expect_status(search(0), INVALID, "project_id")
    await expect_status(search(-1), INVALID, "project_id")
    await expect_status(search(999), NOT_FOUND, "999")
    await expect_status(search(p1.id, query="  "), INVALID, "query")
    await expect_status(search(p1.id, limit=1000), INVALID, "limit")
