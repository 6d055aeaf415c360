"""GraphService's entity rules (domain/graph.py, domain/entity_writes.py),
decided by the domain on the fakes of tests/fakes.py: an upsert finds the
entity its name names under any spelling or case, or makes one in the graph
it names; the index job each write owes its vector; listing by type, graph,
tenant and page; a delete that takes its edges and re-derives what they held.

What a client sees of these over gRPC (the status codes, the vector point)
is tests/e2e/service/test_graph.py's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.graph import METHOD_MANUAL, SOURCE_MANUAL
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.graph import Graph
from nexus_grpc.errors import FailedPrecondition, InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork


def service(uow: FakeUnitOfWork) -> Graph:
    # Entity writes read neither the embedder, the index nor the event stream.
    return Graph(FakeDatabase(uow), JobSignals(), None, None, None)  # type: ignore[arg-type]


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def graph(uow: FakeUnitOfWork) -> Graph:
    return service(uow)


async def upsert(g: Graph, name: str, etype: str = "concept", notes: str = "", **kw):
    return await g.upsert_entity(name, etype, notes, kw.pop("confidence", 0.0),
                                 kw.pop("project_id", 0), **kw)  # fmt: skip


@contextlib.contextmanager
def acting_in(tenant: str) -> Iterator[None]:
    """A caller whose key is the tenant's (bound and reset in the test's own context)."""
    token = tenancy.bind(tenancy.Caller(tenant, None))
    try:
        yield
    finally:
        tenancy.reset(token)


async def test_an_upsert_cleans_the_name_and_a_second_one_counts_a_mention(graph):
    first = await upsert(graph, "  PostgreSQL ", "Technology", notes="a database")
    assert (first.name, first.type, first.notes) == ("PostgreSQL", "technology", "a database")
    assert (first.mention_count, first.confidence, first.source) == (1, 1.0, SOURCE_MANUAL)
    again = await upsert(graph, "PostgreSQL", "technology", confidence=0.5)
    # Absent notes keep the old; a confidence given replaces it.
    assert (again.id, again.mention_count, again.notes, again.confidence) == (
        first.id, 2, "a database", 0.5
    )  # fmt: skip
    assert await graph.get_entity(first.id) == again


async def test_a_name_is_one_entity_whatever_its_case_or_spelling_but_not_its_type(graph, uow):
    python = await upsert(graph, "Python", "technology", notes="a language")
    lower = await upsert(graph, "python", "technology")
    assert (lower.id, lower.name, lower.mention_count) == (python.id, "Python", 2)
    p = uow.projects.insert({"name": "p"}).id
    acme = await upsert(graph, "Acme Corp.", "organization", project_id=p)
    again = await upsert(graph, "ACME", "organization", project_id=p)
    assert (again.id, again.mention_count) == (acme.id, 2)
    assert set(again.aliases) == {"Acme Corp.", "ACME"}
    [alias] = [a for a in uow.graph.list_aliases(acme.id, None, 10) if a.name == "ACME"]
    assert alias.method == METHOD_MANUAL
    place = await upsert(graph, "Acme", "place", project_id=p)
    assert place.id != acme.id


async def test_one_name_in_two_projects_is_two_entities(graph, uow):
    p1, p2 = (uow.projects.insert({"name": n}).id for n in ("one", "two"))
    mine = await upsert(graph, "Postgres", "technology", project_id=p1)
    theirs = await upsert(graph, "Postgres", "technology", project_id=p2)
    assert mine.id != theirs.id
    assert (mine.project_id, theirs.project_id) == (p1, p2)


async def test_an_entity_takes_the_tenant_of_its_graph(graph, uow):
    p = uow.projects.insert({"name": "p"}, "acme").id
    loose = uow.sessions.insert("s", "", 0, {}, "acme").id
    with acting_in("acme"):
        in_project = await upsert(graph, "Ada", "person", project_id=p)
        in_session = await upsert(graph, "Bea", "person", session_id=loose)
    assert (in_project.tenant, in_session.tenant) == ("acme", "acme")
    assert (in_session.project_id, in_session.session_id) == (0, loose)


@pytest.mark.parametrize(
    ("name", "etype", "kw", "field"),
    [
        ("x", "date", {}, "type"),
        ("  ", "person", {}, "name"),
        ("x", "", {}, "type"),
        ("x", "person", {"confidence": 1.5}, "confidence"),
        ("x", "person", {"project_id": -1}, "project_id"),
        ("x", "person", {"session_id": -1}, "session_id"),
        ("x", "person", {"project_id": 1, "session_id": 1}, "project_id"),
    ],
)
async def test_bad_entity_input_names_its_field_and_writes_nothing(graph, uow, name, etype, kw,
                                                                   field):  # fmt: skip
    uow.projects.insert({"name": "p"})
    with pytest.raises(InvalidArgument) as err:
        await upsert(graph, name, etype, **kw)
    assert field in err.value.message
    assert uow.graph.entities == {} and uow.jobs.rows == []


async def test_a_graph_that_is_not_there_or_not_the_callers_is_a_precondition(graph, uow):
    other = uow.projects.insert({"name": "theirs"}, "them").id
    in_project = uow.sessions.insert("s", "", other, {}, "them").id
    with pytest.raises(FailedPrecondition, match="project_id 77 does not exist"):
        await upsert(graph, "x", "person", project_id=77)
    with pytest.raises(FailedPrecondition, match="session_id 55 does not exist"):
        await upsert(graph, "x", "person", session_id=55)
    with pytest.raises(FailedPrecondition, match=f"use project_id {other}"):
        await upsert(graph, "x", "person", session_id=in_project)
    with acting_in("us"):
        with pytest.raises(FailedPrecondition, match=f"project_id {other} does not exist"):
            await upsert(graph, "x", "person", project_id=other)
        with pytest.raises(InvalidArgument, match="belongs to the default tenant"):
            await upsert(graph, "x", "person")
    assert uow.graph.entities == {}


async def test_get_and_delete_refuse_a_missing_entity_or_another_tenants(graph, uow):
    theirs = await upsert(graph, "Ada", "person")
    for bad in (0, -3):
        with pytest.raises(InvalidArgument, match="id"):
            await graph.get_entity(bad)
        with pytest.raises(InvalidArgument, match="id"):
            await graph.delete_entity(bad)
    with pytest.raises(NotFound, match="entity 42 does not exist"):
        await graph.get_entity(42)
    with pytest.raises(NotFound, match="entity 42 does not exist"):
        await graph.delete_entity(42)
    with acting_in("elsewhere"):
        with pytest.raises(NotFound, match=f"entity {theirs.id} does not exist"):
            await graph.get_entity(theirs.id)
        with pytest.raises(NotFound):
            await graph.delete_entity(theirs.id)
    assert list(uow.graph.entities) == [theirs.id]


def index_jobs(uow: FakeUnitOfWork) -> list[int]:
    """The pending index:entities targets, taken (as the worker would)."""
    found = [j.target_id for j in uow.jobs.rows if j.kind == jobs.INDEX_ENTITY]
    uow.jobs.rows = [j for j in uow.jobs.rows if j.kind != jobs.INDEX_ENTITY]
    return found


async def test_each_write_that_changes_a_vector_queues_its_index_job_and_no_other(graph, uow):
    ada = await upsert(graph, "Ada", "person")
    assert index_jobs(uow) == [ada.id]
    await upsert(graph, "Ada", "person")  # a mention: nothing its vector reads
    assert index_jobs(uow) == []
    await upsert(graph, "Ada", "person", notes="wrote the first program")
    assert index_jobs(uow) == [ada.id]
    await upsert(graph, "ADA", "person")  # the same name in other case: no new alias
    assert index_jobs(uow) == []
    await upsert(graph, "Ada Lovelace", "person")  # another entity
    index_jobs(uow)
    await graph.delete_entity(ada.id)
    assert index_jobs(uow) == [ada.id]


async def test_entities_are_listed_by_type_graph_and_name_in_pages(graph, uow):
    p1, p2 = (uow.projects.insert({"name": n}).id for n in ("one", "two"))
    for i in range(5):
        await upsert(graph, f"P{i}", "person", project_id=p1)
    await upsert(graph, "Tool", "technology", project_id=p1)
    await upsert(graph, "Other", "person", project_id=p2)
    names, token = [], ""
    while True:
        page = await graph.list_entities("person", p1, 2, token)
        names += [e.name for e in page.items]
        token = page.next_token
        if not token:
            break
    assert names == ["P0", "P1", "P2", "P3", "P4"]
    mine = await graph.list_entities("", p1, 0, "")
    assert [e.project_id for e in mine.items] == [p1] * 6
    assert len((await graph.list_entities("", 0, 0, "")).items) == 7
    named = await graph.list_entities("", 0, 0, "", name="  other ")
    assert [e.name for e in named.items] == ["Other"]
    for kw, field in (
        ({"etype": "weekday"}, "type"),
        ({"page_token": "junk"}, "page_token"),
        ({"page_size": -1}, "page_size"),
        ({"project_id": -1}, "project_id"),
        ({"project_id": p1, "session_id": 3}, "project_id"),
    ):
        args = {"etype": "", "project_id": 0, "page_size": 0, "page_token": "", **kw}
        with pytest.raises(InvalidArgument, match=field):
            await graph.list_entities(**args)


async def test_a_tenant_lists_only_its_own_entities(graph, uow):
    ours = uow.projects.insert({"name": "ours"}, "us").id
    theirs = uow.projects.insert({"name": "theirs"}, "them").id
    mine = await upsert(graph, "Ada", "person", project_id=ours)
    await upsert(graph, "Ada", "person", project_id=theirs)
    with acting_in("us"):
        assert [e.id for e in (await graph.list_entities("", 0, 0, "")).items] == [mine.id]
        assert (await graph.list_entities("", theirs, 0, "")).items == []


async def test_an_upsert_finds_the_one_entity_an_alias_names_else_makes_its_own(graph, uow):
    robert = await upsert(graph, "Robert Smith", "person")
    uow.graph.add_alias(robert.id, "Bob", method=METHOD_MANUAL)
    bob = await upsert(graph, "bob", "person")
    assert (bob.id, bob.mention_count) == (robert.id, 2)
    # A concept known under the name a technology is given: the same thing.
    vim = await upsert(graph, "Vi Improved", "concept")
    uow.graph.add_alias(vim.id, "Vim", method=METHOD_MANUAL)
    assert (await upsert(graph, "vim", "technology")).id == vim.id
    # Two entities share the alias: the name is neither's, and gets its own.
    kate = await upsert(graph, "Kate Ng", "person")
    other = await upsert(graph, "Kate Wu", "person")
    for e in (kate, other):
        uow.graph.add_alias(e.id, "Kate", method=METHOD_MANUAL)
    alone = await upsert(graph, "Kate", "person")
    assert alone.id not in (kate.id, other.id)
    assert alone.aliases == ("Kate",)
