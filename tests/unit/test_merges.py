"""Merging entities and undoing a merge (domain/merges.py), decided by the
domain on the fakes of tests/fakes.py: a merge folds the sources' aliases,
episode links, mentions and the evidence of their facts into the target and
derives the facts again; a request id replays it; an undo puts every source
back as it was, unless a later merge of its target stands; and what may not
merge (another graph, another type, bad input) is refused with nothing written.

What a client sees of these over gRPC (MergeEntities, UndoMerge, ListMerges,
their status codes, a merge of facts extraction made) is
tests/e2e/service/test_graph_time_and_merges.py's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.graph import HISTORY, MERGE_MANUAL
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.graph import Graph
from nexus_grpc.domain.merges import MAX_SOURCES, Merges
from nexus_grpc.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork, dumps

MARCH, JUNE = 1_709_251_200.0, 1_717_200_000.0


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def graph(uow: FakeUnitOfWork) -> Graph:
    # Merges read neither the embedder, the index nor the event stream.
    return Graph(FakeDatabase(uow), JobSignals(), None, None, None)  # type: ignore[arg-type]


@pytest.fixture
def merges(uow: FakeUnitOfWork) -> Merges:
    return Merges(FakeDatabase(uow), JobSignals())


@contextlib.contextmanager
def acting_in(tenant: str) -> Iterator[None]:
    token = tenancy.bind(tenancy.Caller(tenant, None))
    try:
        yield
    finally:
        tenancy.reset(token)


async def entity(g: Graph, name: str, etype: str, project_id: int, notes: str = "") -> int:
    return (await g.upsert_entity(name, etype, notes, 0.0, project_id)).id


def facts_of(uow: FakeUnitOfWork, entity_id: int) -> list[tuple]:
    return sorted(
        (r.from_id, r.to_id, r.label, r.mention_count, r.valid_at, r.invalid_at)
        for r in uow.graph.list_relationships(entity_id, True, when=HISTORY)
    )


@pytest.fixture
async def bob_and_robert(graph: Graph, uow: FakeUnitOfWork) -> dict[str, int]:
    """Two names nobody tied together: Bob uses Vim, works at Acme and lived
    in Lisbon from March; Robert Smith uses Vim, knows Bob and lives in Porto
    from June. Each was mentioned by an episode, one by both."""
    p = uow.projects.insert({"name": "p"}).id
    session = uow.sessions.insert("s", "", p, {}).id
    e1, e2 = (uow.episodes.insert(session, m, "", {}, None, at).id
              for m, at in (("bob", MARCH), ("robert", JUNE)))  # fmt: skip
    ids = {"p": p, "e1": e1, "e2": e2}
    for name, etype in (("Bob", "person"), ("Vim", "technology"), ("Lisbon", "place"),
                        ("Acme", "organization"), ("Robert Smith", "person"),
                        ("Porto", "place")):  # fmt: skip
        ids[name] = await entity(graph, name, etype, p)
    await graph.upsert_entity("Bob", "person", "Likes Vim", 0.0, p)
    for name, episode in (("Bob", e1), ("Bob", e2), ("Robert Smith", e2)):
        uow.graph.mention(ids[name], None, episode_id=episode)
    for a, label, b, at in (
        ("Bob", "uses", "Vim", MARCH), ("Bob", "lives_in", "Lisbon", MARCH),
        ("Bob", "works_at", "Acme", MARCH), ("Robert Smith", "uses", "Vim", JUNE),
        ("Robert Smith", "knows", "Bob", JUNE), ("Robert Smith", "lives_in", "Porto", JUNE),
    ):  # fmt: skip
        await graph.upsert_relationship(ids[a], ids[b], label, "", valid_time=at)
    return ids


async def test_a_merge_folds_facts_links_aliases_and_mentions_and_undo_restores_them(
    merges, uow, bob_and_robert
):
    ids = bob_and_robert
    robert, bob = ids["Robert Smith"], ids["Bob"]
    before = {e: (uow.graph.get_entity(e), facts_of(uow, e)) for e in (robert, bob)}
    links_before = sorted(uow.graph.episode_links)
    uow.jobs.rows.clear()

    merge = await merges.merge(robert, [bob, bob], "m-1", "  same person ", principal="ann")
    assert (merge.method, merge.source_ids, merge.reason, merge.principal) == (
        MERGE_MANUAL, (bob,), "same person", "ann"
    )  # fmt: skip
    assert uow.graph.entity_graph(bob) is None
    merged = uow.graph.get_entity(robert)
    assert set(merged.aliases) == {"Robert Smith", "Bob"}
    assert (merged.mention_count, merged.notes) == (
        before[robert][0].mention_count + before[bob][0].mention_count, "Likes Vim"
    )  # fmt: skip
    assert {j.target_id for j in uow.jobs.rows if j.kind == jobs.INDEX_ENTITY} == {robert, bob}
    facts = facts_of(uow, robert)
    # "uses Vim" twice is one with both mentions; "knows Bob" became a
    # self-loop and went; Lisbon (March) is ended by Porto (June).
    assert [f[3] for f in facts if f[2] == "uses"] == [2]
    assert not any(f[2] == "knows" for f in facts)
    assert sorted((f[1], f[5]) for f in facts if f[2] == "lives_in") == sorted(
        [(ids["Lisbon"], JUNE), (ids["Porto"], None)]
    )
    assert [f[1] for f in facts if f[2] == "works_at"] == [ids["Acme"]]
    assert sorted(uow.graph.episode_links) == [(robert, ids["e1"]), (robert, ids["e2"])]

    # The same request again answers with the same merge; with other entities, a refusal.
    assert (await merges.merge(robert, [bob], "m-1")).id == merge.id
    with pytest.raises(AlreadyExists, match=f"already used for merge {merge.id}"):
        await merges.merge(robert, [ids["Vim"]], "m-1")

    undone = await merges.undo(merge.id)
    assert undone.undone_at is not None
    for e in (robert, bob):
        now = uow.graph.get_entity(e)
        was = before[e][0]
        assert (now.name, now.mention_count, now.notes, now.aliases) == (
            was.name, was.mention_count, was.notes, was.aliases
        )  # fmt: skip
        assert facts_of(uow, e) == before[e][1]
    assert sorted(uow.graph.episode_links) == links_before
    with pytest.raises(FailedPrecondition, match=f"merge {merge.id} was already undone"):
        await merges.undo(merge.id)


async def test_an_undo_a_later_merge_depends_on_is_refused_naming_it(graph, merges, uow):
    p = uow.projects.insert({"name": "p"}).id
    names = ("Ann Lee", "A. Lee", "Annie", "Di", "Eve")
    a, b, c, d, e = [await entity(graph, n, "person", p) for n in names]
    first = await merges.merge(a, [b])
    second = await merges.merge(c, [a])
    await merges.merge(d, [e])  # later, but of other entities: no bar
    with pytest.raises(FailedPrecondition) as err:
        await merges.undo(first.id)
    assert f"later merge(s) {second.id} of its target entity {a} stand: undo those" in (
        err.value.message
    )
    await merges.undo(second.id)
    await merges.undo(first.id)
    assert {x.name for x in uow.graph.entities.values()} == {"Ann Lee", "A. Lee", "Annie", "Di"}
    listed = await merges.list(0, 0, a, 0, "")
    assert [m.id for m in listed.items] == [first.id, second.id]
    assert [m.id for m in (await merges.list(p, 0, 0, 1, "")).items] == [first.id]


async def test_a_merge_whose_target_was_deleted_cannot_be_undone(graph, merges, uow):
    p = uow.projects.insert({"name": "p"}).id
    a, b = [await entity(graph, n, "person", p) for n in ("Ann", "Bea")]
    merge = await merges.merge(a, [b])
    await graph.delete_entity(a)
    with pytest.raises(FailedPrecondition, match=f"its target entity {a} was deleted"):
        await merges.undo(merge.id)


async def test_what_may_not_merge_is_refused_and_nothing_is_written(graph, merges, uow):
    p1, p2 = (uow.projects.insert({"name": n}).id for n in ("one", "two"))
    jordan = await entity(graph, "Jordan", "person", p1)
    country = await entity(graph, "Jordan", "place", p1)
    other = await entity(graph, "Jordan", "person", p2)
    written = dumps(vars(uow.graph))
    with pytest.raises(InvalidArgument, match="never merge"):
        await merges.merge(jordan, [country])
    with pytest.raises(InvalidArgument, match="another graph"):
        await merges.merge(jordan, [other])
    for target, sources, text in (
        (jordan, [], "at least one"),
        (0, [country], "target_id"),
        (jordan, [jordan], "includes the target"),
        (jordan, [-1], "source_ids"),
        (jordan, list(range(1, MAX_SOURCES + 2)), f"at most {MAX_SOURCES}"),
    ):
        with pytest.raises(InvalidArgument, match=text):
            await merges.merge(target, sources)
    with pytest.raises(NotFound, match="source_ids: no entity 999999"):
        await merges.merge(jordan, [999_999])
    with pytest.raises(InvalidArgument, match="merge_id"):
        await merges.undo(0)
    with pytest.raises(NotFound, match="merge 5 does not exist"):
        await merges.undo(5)
    with pytest.raises(InvalidArgument, match="exactly one"):
        await merges.list(p1, 0, jordan, 0, "")
    assert dumps(vars(uow.graph)) == written


async def test_another_tenants_entities_and_merges_are_not_there(graph, merges, uow):
    ours = uow.projects.insert({"name": "ours"}, "us").id
    theirs = uow.projects.insert({"name": "theirs"}, "them").id
    a, b = [await entity(graph, n, "person", theirs) for n in ("Ann", "Bea")]
    merge = await merges.merge(a, [b])
    with acting_in("us"):
        with pytest.raises(NotFound, match=f"entity {a} does not exist"):
            await merges.merge(a, [b])
        with pytest.raises(NotFound, match=f"merge {merge.id} does not exist"):
            await merges.undo(merge.id)
        assert (await merges.list(0, 0, a, 0, "")).items == []
        assert (await merges.list(ours, 0, 0, 0, "")).items == []
    assert uow.graph.get_merge(merge.id).undone_at is None
