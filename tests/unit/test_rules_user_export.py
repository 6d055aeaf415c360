"""ExportUser's rules (domain/user_export.py) on the fakes of tests/fakes.py:
who may export a user (as ForgetUser: anyone else hears of a user who holds
nothing, before a record is sent), what the export holds and in what order
(the user's sessions, their USER memories each followed by its history,
their uses), a project limiting it, and every row read past one page.

Not here: a user's episodes and what the graph holds from them, which the
export reads through the erasure repository's ``graph_of_episodes`` (not
faked: the graph's side of an erasure); the whole-server tier keeps them:
tests/e2e/service/test_forget_user.py (an export holds the user's words and
none of another user's) and tests/e2e/api/test_forget_user_rights.py (who
may export, over the wire).
"""

from __future__ import annotations

import pytest

from nexus_grpc.core.models import MemoryKind, Session, Tier
from nexus_grpc.core.records import (
    UPDATE,
    ChangedBy,
    Memory,
    MemoryUsage,
    Revision,
    UsageOwner,
    UsageRecord,
)
from nexus_grpc.domain import user_export
from nexus_grpc.domain.erasures import _nothing_held
from nexus_grpc.domain.user_export import UserExport
from nexus_grpc.errors import InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.callers import acting_as

T1 = "t1"


def _memory(uow: FakeUnitOfWork, user_id: str, project_id: int, kind=MemoryKind.USER) -> int:
    values = {
        "kind": int(kind), "title": "t", "content": f"{user_id}'s", "tier": int(Tier.LONGTERM),
        "project_id": project_id, "agent_id": "", "user_id": user_id, "session_id": 0,
        "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    return uow.memories.insert(values, None, T1).id


def _revise(uow: FakeUnitOfWork, memory_id: int, content: str) -> None:
    """An update that keeps the version it replaced, as the memory use cases do."""
    uow.memories.record(uow.memories.get(memory_id), UPDATE, ["content"], ChangedBy())
    uow.memories.update(memory_id, {"content": content})


def _use(uow: FakeUnitOfWork, user_id: str, project_id: int, memory_id: int) -> None:
    owner = UsageOwner(user_id, project_id, T1)
    uow.memories.record_usage("th", owner, "ctx", [UsageRecord(memory_id, 0.5, 1)])


async def _export(db: FakeDatabase, user_id: str, project_id: int = 0) -> list:
    return [r async for r in UserExport(db, T1).records(user_id, project_id)]


def _shape(items: list) -> list[tuple[str, int]]:
    """Each item as its kind and the id it is about."""
    kinds = {Session: "session", Memory: "memory", Revision: "revision", MemoryUsage: "use"}
    return [
        (kinds[type(i)], i.memory_id if isinstance(i, (Revision, MemoryUsage)) else i.id)
        for i in items
    ]


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def db(uow: FakeUnitOfWork) -> FakeDatabase:
    return FakeDatabase(uow)


@pytest.fixture
def project(uow: FakeUnitOfWork) -> int:
    return uow.projects.insert({"name": "p"}, T1).id


async def test_sessions_then_each_user_memory_and_its_history_then_the_uses(db, uow, project):
    session = uow.sessions.insert("s", "", project, {}, T1, user_id="ann").id
    first, second = _memory(uow, "ann", project), _memory(uow, "ann", project)
    _revise(uow, first, "v2")
    _revise(uow, first, "v3")
    shared = _memory(uow, "", project, MemoryKind.PROJECT)
    _use(uow, "ann", project, shared)
    _use(uow, "ann", project, second)
    items = await _export(db, "ann")
    assert _shape(items) == [
        ("session", session),
        ("memory", first),
        ("revision", first),
        ("revision", first),
        ("memory", second),
        ("use", shared),
        ("use", second),
    ]
    # The memory as it stands, its history oldest first.
    memory, *history = items[1:4]
    assert [memory.content] + [r.previous.content for r in history] == ["v3", "ann's", "v2"]


async def test_another_users_rows_and_memories_of_no_user_are_not_in_it(db, uow, project):
    mine = _memory(uow, "ann", project)
    uow.sessions.insert("s", "", project, {}, T1, user_id="bob")
    bobs = _memory(uow, "bob", project)
    _memory(uow, "ann", project, MemoryKind.PROJECT)  # a project memory ann wrote
    _use(uow, "bob", project, bobs)
    assert _shape(await _export(db, "ann")) == [("memory", mine)]


async def test_a_project_limits_the_export_to_what_the_user_holds_there(db, uow, project):
    other = uow.projects.insert({"name": "q"}, T1).id
    here = uow.sessions.insert("s", "", project, {}, T1, user_id="ann").id
    uow.sessions.insert("s2", "", other, {}, T1, user_id="ann")
    mine = _memory(uow, "ann", project)
    _memory(uow, "ann", other)
    _use(uow, "ann", other, mine)  # a use is in the project that selected
    assert _shape(await _export(db, "ann", project)) == [("session", here), ("memory", mine)]


async def test_every_row_comes_past_one_reads_page(db, uow, project, monkeypatch):
    monkeypatch.setattr(user_export, "PAGE", 2)
    sessions = [
        uow.sessions.insert(f"s{i}", "", project, {}, T1, user_id="ann").id for i in range(3)
    ]
    memories = [_memory(uow, "ann", project) for _ in range(5)]
    for n in range(3):
        _revise(uow, memories[0], f"v{n}")
    for memory in memories[:3]:
        _use(uow, "ann", project, memory)
    assert _shape(await _export(db, "ann")) == (
        [("session", s) for s in sessions]
        + [("memory", memories[0])]
        + [("revision", memories[0])] * 3
        + [("memory", m) for m in memories[1:]]
        + [("use", m) for m in memories[:3]]
    )


async def test_a_user_no_key_may_act_for_is_answered_as_one_who_holds_nothing(db, uow, project):
    _memory(uow, "bob", project)
    with acting_as(T1, frozenset({"ann"})):
        for user in ("bob", "zed"):
            with pytest.raises(NotFound) as err:
                await _export(db, user)
            assert (err.value.message, err.value.details) == (
                f"user {user!r} holds nothing here",
                _nothing_held(user).details,
            )


async def test_another_tenants_user_holds_nothing_here(db, uow, project):
    _memory(uow, "ann", project)
    with acting_as("t2"), pytest.raises(NotFound, match="user 'ann' holds nothing here"):
        await _export(db, "ann")


async def test_a_project_of_another_tenant_does_not_exist(db, uow, project):
    _memory(uow, "ann", project)
    theirs = uow.projects.insert({"name": "q"}, "t2").id
    with pytest.raises(NotFound, match=f"project {theirs} does not exist") as err:
        await _export(db, "ann", theirs)
    assert err.value.details[0].resource_type == "project"


async def test_the_refusal_comes_before_any_record(db, uow, project):
    uow.sessions.insert("s", "", project, {}, T1, user_id="ann")
    records = UserExport(db, T1).records("ann", 0)
    with acting_as(T1, frozenset({"bob"})), pytest.raises(NotFound):
        await anext(records)


async def test_a_user_id_is_required(db):
    with pytest.raises(InvalidArgument) as err:
        await _export(db, "")
    assert err.value.field == "user_id"
