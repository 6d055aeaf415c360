"""The memory cap and by-id ownership (domain/memories.py), decided by the
domain on the fakes of tests/fakes.py.

The cap bounds what one selection reads: PROJECT memories per (project,
agent), USER memories per (project, agent, user), the ARCHIVE tier outside
it. A USER memory answers by id only to its user, and a TASK or SESSION
memory stored with a session only in that session. What a client sees of
these over gRPC (the status codes) is tests/e2e/service/test_memories.py's:
``test_cap_per_project_and_agent`` and
``test_user_memory_needs_its_owner_for_get_update_delete``.
"""

from __future__ import annotations

from typing import Any

import pytest

from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.memories import Memories
from nexus_grpc.errors import FailedPrecondition, InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork

P, U = int(MemoryKind.PROJECT), int(MemoryKind.USER)
TASK, SESSION, LONGTERM, ARCHIVE = (int(t) for t in Tier)


def memories(uow: FakeUnitOfWork, cap: int) -> Memories:
    # Neither the embedder nor the vector index is read by these rules.
    return Memories(FakeDatabase(uow), JobSignals(), None, None, cap=cap)  # type: ignore[arg-type]


async def create(m: Memories, **values: Any) -> int:
    values.setdefault("content", f"zebra content for {values.get('title', '')}")
    return (await m.create(values)).id


async def refusal(m: Memories, **values: Any) -> str:
    with pytest.raises(FailedPrecondition) as err:
        await create(m, **values)
    return err.value.message


async def test_a_project_and_agent_hold_at_most_the_cap_of_project_memories():
    uow = FakeUnitOfWork()
    p1, p2 = (uow.projects.insert({"name": n}).id for n in ("p1", "p2"))
    m = memories(uow, cap=3)
    for i in range(3):
        await create(m, kind=P, title=f"m{i}", project_id=p1, agent_id="a")
    message = await refusal(m, kind=P, title="one too many", project_id=p1, agent_id="a")
    assert "project 1 already holds 3 PROJECT memories for agent 'a'" in message
    assert "limit is 3 per project and agent" in message
    # Another agent, another project: caps of their own.
    await create(m, kind=P, title="other agent", project_id=p1, agent_id="b")
    await create(m, kind=P, title="other project", project_id=p2, agent_id="a")
    assert len(uow.memories.rows) == 5


async def test_one_user_filling_their_cap_never_blocks_another():
    uow = FakeUnitOfWork()
    p1 = uow.projects.insert({"name": "p1"}).id
    m = memories(uow, cap=3)
    for i in range(3):
        await create(m, kind=U, title=f"alice {i}", project_id=p1, user_id="alice")
    message = await refusal(m, kind=U, title="alice 4", project_id=p1, user_id="alice")
    assert f"user 'alice' already holds 3 USER memories in project {p1}" in message
    # Bob, and the project's own memories, still have their whole cap.
    for i in range(3):
        await create(m, kind=U, title=f"bob {i}", project_id=p1, user_id="bob")
        await create(m, kind=P, title=f"proj {i}", project_id=p1)
    message = await refusal(m, kind=U, title="bob 4", project_id=p1, user_id="bob")
    # Bob's refusal tells him his own count, nothing about alice or the project.
    assert "user 'bob' already holds 3" in message
    assert "alice" not in message and "9" not in message
    # Alice's memories outside the project are a cap of their own.
    await create(m, kind=U, title="alice anywhere", user_id="alice")


async def test_the_archive_tier_is_outside_the_cap_and_leaving_it_counts_as_a_create():
    uow = FakeUnitOfWork()
    p1 = uow.projects.insert({"name": "p1"}).id
    m = memories(uow, cap=2)
    a = await create(m, kind=P, title="a", project_id=p1)
    await create(m, kind=P, title="b", project_id=p1)
    await refusal(m, kind=P, title="c", project_id=p1)
    # Archived memories are not read at selection: any number may be kept.
    for i in range(3):
        await create(m, kind=P, title=f"old {i}", project_id=p1, tier=ARCHIVE)
    await m.update(a, {"tier": ARCHIVE}, ["tier"], "")
    c = await create(m, kind=P, title="c", project_id=p1)
    # Bringing one back out of ARCHIVE is a create as far as the cap goes,
    # and the refusal writes nothing.
    with pytest.raises(FailedPrecondition, match="already holds 2 PROJECT memories"):
        await m.update(a, {"tier": LONGTERM}, ["tier"], "")
    assert (await m.get(a, "")).tier == ARCHIVE
    assert uow.memories.page(a, None, 10)[-1].changed == ["tier"]  # the archiving only
    await m.update(c, {"tier": ARCHIVE}, ["tier"], "")
    assert (await m.update(a, {"tier": LONGTERM}, ["tier"], "")).tier == LONGTERM


async def test_a_session_tier_memory_answers_by_id_only_in_its_origin_session():
    uow = FakeUnitOfWork()
    p1 = uow.projects.insert({"name": "p1"}).id
    s1, s2 = (uow.sessions.insert(f"s{i}", "", p1, {}).id for i in (1, 2))
    m = memories(uow, cap=10)
    for tier in (TASK, SESSION):
        mem = await create(m, kind=P, title=f"plan {tier}", project_id=p1, session_id=s1, tier=tier)
        # The positive case first: its own session reads it.
        assert (await m.get(mem, "", s1)).id == mem
        for sid in (0, s2):
            with pytest.raises(NotFound, match=f"memory {mem} does not exist"):
                await m.get(mem, "", sid)
            with pytest.raises(NotFound):
                await m.update(mem, {"tier": LONGTERM}, ["tier"], "", sid)
            with pytest.raises(NotFound):
                await m.delete(mem, "", sid)
        # The refusals wrote nothing: still there, still session-bound, no history.
        got = await m.get(mem, "", s1)
        assert (got.tier, got.title) == (tier, f"plan {tier}")
        assert uow.memories.page(mem, None, 10) == []
        await m.delete(mem, "", s1)
        with pytest.raises(NotFound):
            await m.get(mem, "", s1)
    # Shared tiers, and session tiers stored outside a session, need no session.
    shared = await create(m, kind=P, title="shared", project_id=p1, session_id=s1, tier=LONGTERM)
    loose = await create(m, kind=P, title="loose", project_id=p1, tier=TASK)
    for mem in (shared, loose):
        assert (await m.get(mem, "")).id == mem
    with pytest.raises(InvalidArgument, match="session_id"):
        await m.get(shared, "", -1)


async def test_a_user_memory_answers_by_id_only_to_its_user():
    """No user, or another user, reads a USER memory's id as one that does not
    exist, and their update or delete writes nothing."""
    uow = FakeUnitOfWork()
    m = memories(uow, cap=10)
    mem = await create(m, kind=U, title="alice likes tea", user_id="alice")
    # The positive case first: its owner reads it, so a NotFound below is the
    # refusal, not a memory that was never there.
    assert (await m.get(mem, "alice")).id == mem
    for uid in ("", "bob"):
        with pytest.raises(NotFound, match=f"memory {mem} does not exist"):
            await m.get(mem, uid)
        with pytest.raises(NotFound, match=f"memory {mem} does not exist"):
            await m.update(mem, {"title": "pwned"}, ["title"], uid)
        with pytest.raises(NotFound, match=f"memory {mem} does not exist"):
            await m.delete(mem, uid)
    assert (await m.get(mem, "alice")).title == "alice likes tea"
    assert uow.memories.page(mem, None, 10) == []
    await m.delete(mem, "alice")
    assert uow.memories.rows == {}
