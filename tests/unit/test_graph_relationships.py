"""GraphService's relationship and traversal rules (domain/graph.py,
domain/facts.py), decided by the domain on the fakes of tests/fakes.py:
labels in snake_case, repeated assertions counted, intervals from valid and
invalid times, a project's single-valued labels, deletes that let what a fact
ended hold again, pages in id order, and walks that reach their depth both
ways, through cycles, at the time asked.

What a client sees of these over gRPC (the status codes, the times as
Timestamps) is tests/e2e/service/test_graph.py's and
test_graph_time_and_merges.py's."""

from __future__ import annotations

import pytest

from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.graph import MAX_NEIGHBOR_SEEDS, Graph
from nexus_grpc.errors import FailedPrecondition, InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork

MARCH, APRIL, JUNE = 1_709_251_200.0, 1_711_929_600.0, 1_717_200_000.0


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def graph(uow: FakeUnitOfWork) -> Graph:
    # Relationships and walks read neither the embedder, the index nor the events.
    return Graph(FakeDatabase(uow), JobSignals(), None, None, None)  # type: ignore[arg-type]


async def entity(g: Graph, name: str, etype: str = "concept", project_id: int = 0) -> int:
    return (await g.upsert_entity(name, etype, "", 0.0, project_id)).id


async def edge(g: Graph, a: int, b: int, label: str = "related_to", notes: str = "", **kw):
    return await g.upsert_relationship(a, b, label, notes, **kw)


async def listed(g: Graph, entity_id: int, inbound: bool = False, **kw) -> list:
    return (await g.list_relationships(entity_id, inbound, **kw)).items


async def test_a_label_is_snake_case_and_a_repeated_fact_counts_its_mentions(graph):
    a, b, c = [await entity(graph, n) for n in "abc"]
    r1 = await edge(graph, a, b, "Works With", "colleagues", valid_time=MARCH)
    assert (r1.label, r1.mention_count, r1.notes) == ("works_with", 1, "colleagues")
    again = await edge(graph, a, b, "worksWith", valid_time=APRIL)
    assert (again.id, again.mention_count, again.notes) == (r1.id, 2, "colleagues")
    r2 = await edge(graph, c, a, "knows")
    assert [r.id for r in await listed(graph, a)] == [r1.id]
    assert [r.id for r in await listed(graph, a, True)] == [r1.id, r2.id]
    await graph.delete_relationship(a, b, "works with")
    assert await listed(graph, a) == []
    with pytest.raises(NotFound, match=f"no relationship {a} -\\[works_with\\]-> {b}"):
        await graph.delete_relationship(a, b, "works with")


async def test_a_hubs_relationships_come_in_pages_each_once_in_id_order(graph):
    hub = await entity(graph, "hub")
    spokes = [await entity(graph, f"spoke {i}") for i in range(7)]
    made = [(await edge(graph, hub, s, "links")).id for s in spokes[:4]]
    made += [(await edge(graph, s, hub, "feeds")).id for s in spokes[4:]]
    seen, token = [], ""
    for _ in range(10):
        page = await graph.list_relationships(hub, True, 3, token)
        assert len(page.items) <= 3
        seen += [r.id for r in page.items]
        token = page.next_token
        if not token:
            break
    assert seen == sorted(made)
    outbound = await graph.list_relationships(hub, False, 2)
    assert [r.id for r in outbound.items] == made[:2] and outbound.next_token


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((0, 2, "x"), "from_id"),
        ((1, -2, "x"), "to_id"),
        ((1, 1, "x"), "different"),
        ((1, 2, "  "), "label"),
        ((1, 2, "!!!"), "label"),
    ],
)
async def test_a_bad_relationship_names_what_is_wrong_and_writes_nothing(graph, uow, args, field):
    await entity(graph, "a")
    await entity(graph, "b")
    with pytest.raises(InvalidArgument, match=field):
        await edge(graph, *args)
    assert uow.graph.relationships == {} and uow.graph.evidence == {}


async def test_a_relationship_joins_existing_entities_of_one_graph(graph, uow):
    a, b = await entity(graph, "a"), await entity(graph, "b")
    p = uow.projects.insert({"name": "p"}).id
    elsewhere = await entity(graph, "b", project_id=p)
    assert elsewhere != b
    with pytest.raises(NotFound, match="from_id: entity 99 does not exist"):
        await edge(graph, 99, b)
    with pytest.raises(NotFound, match="to_id: entity 98 does not exist"):
        await edge(graph, a, 98)
    with pytest.raises(FailedPrecondition) as err:
        await edge(graph, a, elsewhere)
    assert f"belongs to project 0 (no project) and entity {elsewhere} to project {p}" in (
        err.value.message
    )
    assert "a relationship joins entities of one project" in err.value.message
    with pytest.raises(NotFound, match="99"):
        await listed(graph, 99)
    with pytest.raises(InvalidArgument, match="entity_id"):
        await listed(graph, 0)
    with pytest.raises(InvalidArgument, match="from_id"):
        await graph.delete_relationship(-1, b, "x")
    assert uow.graph.relationships == {} and uow.graph.evidence == {}


async def test_a_fact_given_an_end_is_history_and_times_must_make_sense(graph):
    a, b = await entity(graph, "Priya", "person"), await entity(graph, "Acme", "organization")
    r = await edge(graph, a, b, "works_at", valid_time=MARCH, invalid_time=JUNE)
    assert (r.valid_at, r.invalid_at) == (MARCH, JUNE)
    assert await listed(graph, a) == []
    assert [x.id for x in await listed(graph, a, as_of=APRIL)] == [r.id]
    assert [x.id for x in await listed(graph, a, include_history=True)] == [r.id]
    for kw, field in (
        ({"valid_time": JUNE, "invalid_time": MARCH}, "invalid_time must be after"),
        ({"valid_time": -5.0}, "valid_time must be a time after 1970"),
        ({"valid_time": 1e13}, "valid_time must be a time after 1970"),
        ({"invalid_time": -1.0}, "invalid_time must be a time after 1970"),
    ):
        with pytest.raises(InvalidArgument, match=field):
            await edge(graph, a, b, "x", **kw)
    with pytest.raises(InvalidArgument, match="not both"):
        await listed(graph, a, as_of=MARCH, include_history=True)
    with pytest.raises(InvalidArgument, match="as_of must be a time after 1970"):
        await listed(graph, a, as_of=-1.0)


async def test_a_projects_labels_say_which_facts_hold_one_value(graph, uow):
    own = uow.projects.insert({"name": "own", "single_valued_labels": ["lives_in", "owns"]}).id
    plain = uow.projects.insert({"name": "plain"}).id
    for p in (own, plain):
        priya = await entity(graph, "Priya", "person", p)
        acme = await entity(graph, "Acme", "organization", p)
        globex = await entity(graph, "Globex", "organization", p)
        await edge(graph, priya, acme, "works_at", valid_time=MARCH)
        await edge(graph, priya, globex, "works_at", valid_time=JUNE)
        now = [r.to_id for r in await listed(graph, priya)]
        # works_at holds one value by default; the project that names its own
        # labels left it out: two jobs at once.
        assert now == ([acme, globex] if p == own else [globex])


async def test_deleting_a_fact_or_its_value_lets_what_it_ended_hold_again(graph, uow):
    p = uow.projects.insert({"name": "p"}).id
    priya = await entity(graph, "Priya", "person", p)
    lisbon, porto, oslo = [await entity(graph, n, "place", p) for n in ("Lisbon", "Porto", "Oslo")]
    await edge(graph, priya, lisbon, "lives_in", valid_time=MARCH)
    await edge(graph, priya, porto, "lives_in", valid_time=APRIL)
    await edge(graph, priya, oslo, "lives_in", valid_time=JUNE)
    assert [r.to_id for r in await listed(graph, priya)] == [oslo]
    await graph.delete_relationship(priya, oslo, "lives_in")
    [now] = await listed(graph, priya)
    assert (now.to_id, now.valid_at, now.invalid_at) == (porto, APRIL, None)
    assert await graph.delete_entity(porto) == 1
    [now] = await listed(graph, priya)
    assert (now.to_id, now.invalid_at) == (lisbon, None)
    history = await listed(graph, priya, include_history=True)
    assert [(r.to_id, r.valid_at) for r in history] == [(lisbon, MARCH)]


async def test_deleting_an_entity_counts_and_takes_its_edges_both_ways(graph):
    a, b, c = [await entity(graph, n) for n in "abc"]
    await edge(graph, a, b)
    await edge(graph, c, a)
    await edge(graph, b, c)
    assert await graph.delete_entity(a) == 2
    assert [(r.from_id, r.to_id) for r in await listed(graph, b, True)] == [(b, c)]


async def cyclic(g: Graph) -> dict[str, int]:
    """a -> b -> c -> a (a cycle), c -> d, e -> d, e -> f, and an island z."""
    ids = {n: await entity(g, n) for n in "abcdefz"}
    for x, y in ["ab", "bc", "ca", "cd", "ed", "ef"]:
        await edge(g, ids[x], ids[y])
    return ids


def shown(sub, ids: dict[str, int]) -> tuple[set[str], set[str]]:
    back = {v: k for k, v in ids.items()}
    return {back[n.id] for n in sub.nodes}, {back[e.from_id] + back[e.to_id] for e in sub.edges}


async def test_a_neighborhood_reaches_its_depth_both_ways_once_through_a_cycle(graph):
    ids = await cyclic(graph)
    default = await graph.neighborhood(ids["a"], 0)
    assert shown(default, ids) == ({"a", "b", "c"}, {"ab", "bc", "ca"})
    assert default == await graph.neighborhood(ids["a"], 1)
    assert shown(await graph.neighborhood(ids["a"], 2), ids) == (
        {"a", "b", "c", "d"}, {"ab", "bc", "ca", "cd"}
    )  # fmt: skip
    three = await graph.neighborhood(ids["a"], 3)
    assert shown(three, ids) == ({"a", "b", "c", "d", "e"}, {"ab", "bc", "ca", "cd", "ed"})
    assert len(three.nodes) == 5
    assert shown(await graph.neighborhood(ids["z"], 1), ids) == ({"z"}, set())
    for depth in (4, -1):
        with pytest.raises(InvalidArgument, match="depth must be between 1 and 3"):
            await graph.neighborhood(ids["a"], depth)
    with pytest.raises(InvalidArgument, match="entity_id"):
        await graph.neighborhood(0, 1)
    with pytest.raises(NotFound, match="entity 999 does not exist"):
        await graph.neighborhood(999, 1)


async def test_a_walk_keeps_to_the_time_it_is_asked(graph):
    a, b, c = [await entity(graph, n) for n in "abc"]
    await edge(graph, a, b, "knew", valid_time=MARCH, invalid_time=APRIL)
    await edge(graph, b, c, "knows", valid_time=JUNE)
    ids = {"a": a, "b": b, "c": c}
    assert shown(await graph.neighborhood(b, 1), ids) == ({"b", "c"}, {"bc"})
    assert shown(await graph.neighborhood(b, 1, as_of=MARCH), ids) == ({"a", "b"}, {"ab"})
    assert shown(await graph.neighborhood(a, 2, include_history=True), ids) == (
        {"a", "b", "c"}, {"ab", "bc"}
    )  # fmt: skip
    assert shown(await graph.neighbors([a], as_of=JUNE), ids) == ({"a"}, set())


async def test_neighbors_of_a_set_are_one_hop_and_every_edge_inside(graph):
    ids = await cyclic(graph)
    sub = await graph.neighbors([ids["b"], ids["f"], ids["b"]])
    # b: a (in), c (out); f: e (in).  Every edge inside {a, b, c, e, f}:
    assert shown(sub, ids) == ({"a", "b", "c", "e", "f"}, {"ab", "bc", "ca", "ef"})
    with pytest.raises(InvalidArgument, match="at least one"):
        await graph.neighbors([])
    with pytest.raises(InvalidArgument, match="entity_ids"):
        await graph.neighbors([ids["a"], 0])
    with pytest.raises(InvalidArgument, match=f"the limit is {MAX_NEIGHBOR_SEEDS}"):
        await graph.neighbors(list(range(1, MAX_NEIGHBOR_SEEDS + 2)))
    with pytest.raises(NotFound, match="entity_ids: no entity 555, 556") as err:
        await graph.neighbors([ids["a"], 555, 556])
    assert [d.resource_name for d in err.value.details] == ["555", "556"]
