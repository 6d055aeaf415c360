"""Who may forget and export a user, and read an erasure (domain/erasures.py,
domain/user_export.py), on the fakes of tests/fakes.py: an admin or ``*``
key of the tenant any of its users, a user key only its own. Another user's
key and every key of another tenant are answered exactly as for a user who
holds nothing (NOT_FOUND, one message), and nothing changes; an erasure is
read only by the keys that may forget its user; a receipt names its user
only to a request that named them.

The keys are tests/e2e/api/test_forget_user_rights.py's; that file keeps the
wiring (a user key forgetting its own user and reading its receipt over the
wire, and ListErasures refused to any key but an admin's).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from nexus_grpc.core import erasure as e
from nexus_grpc.core import tenancy
from nexus_grpc.core.erasure import Erasure
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.records import Memory
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import erasure
from nexus_grpc.domain.erasures import Erasures
from nexus_grpc.domain.user_export import UserExport
from nexus_grpc.errors import NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork, dumps

KEYS = {
    "a-alice": tenancy.Caller("A", frozenset({"alice"})),
    "a-carol": tenancy.Caller("A", frozenset({"carol"})),
    "a-star": tenancy.Caller("A"),
    "a-admin": tenancy.Caller("A", all_tenants=True),
    "b-star": tenancy.Caller("B"),
    "b-alice": tenancy.Caller("B", frozenset({"alice"})),
    "b-admin": tenancy.Caller("B", all_tenants=True),
}


@contextmanager
def key(name: str) -> Iterator[None]:
    token = tenancy.bind(KEYS[name])
    try:
        yield
    finally:
        tenancy.reset(token)


def speaks(uow: FakeUnitOfWork, tenant: str, project: int, user: str) -> None:
    """The user's session, an episode and a note in the project."""
    session = uow.sessions.insert(f"{tenant}-{user}", "", project, {}, tenant, user_id=user).id
    uow.episodes.insert(session, f"{user} speaks", "ok", {}, None, acts_for=user)
    values: dict[str, Any] = {
        "kind": int(MemoryKind.USER), "title": "note", "content": f"{user}'s note",
        "tier": int(Tier.LONGTERM), "project_id": project, "agent_id": "", "user_id": user,
        "session_id": 0, "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    uow.memories.insert(values, None, tenant)


@pytest.fixture
def uow() -> FakeUnitOfWork:
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "atlas"}, "A").id
    for user in ("alice", "carol"):
        speaks(uow, "A", project, user)
    return uow


@pytest.fixture
def erasures(uow: FakeUnitOfWork) -> Erasures:
    return Erasures(FakeDatabase(uow), JobSignals(), "default")


def rows(uow: FakeUnitOfWork) -> str:
    """Every row a refused request must leave as it was."""
    return dumps([
        uow.sessions.rows, uow.episodes.rows, uow.memories.rows, uow.erasures.rows,
        [vars(j) for j in uow.jobs.rows],
    ])  # fmt: skip


async def refused(call: Any) -> str:
    with pytest.raises(NotFound) as err:
        await call
    return err.value.message


async def exported(uow: FakeUnitOfWork, user: str) -> list[Any]:
    return [r async for r in UserExport(FakeDatabase(uow), "default").records(user, 0)]


async def done(uow: FakeUnitOfWork, erasure_id: int) -> Erasure:
    """The eraser worker's steps, then the receipt made final."""
    for _ in range(100):
        after = erasure.step(uow, erasure_id, time.time() + 1)
        if after is not None and after.phase == e.DISK:
            break
    finished = erasure.finish(uow, erasure_id)
    assert finished is not None
    return finished


async def test_another_user_or_tenant_hears_of_a_user_who_holds_nothing(uow, erasures):
    with key("a-star"):
        nobody = await refused(erasures.forget_user("zed", 0, "a-star"))
    before = rows(uow)
    for who in ("a-carol", "b-star", "b-alice", "b-admin"):
        with key(who):
            for call in (erasures.forget_user("alice", 0, who), exported(uow, "alice")):
                assert await refused(call) == nobody.replace("zed", "alice"), who
    assert rows(uow) == before


async def test_tenant_b_forgets_only_its_own_alice(uow, erasures):
    b_project = uow.projects.insert({"name": "b"}, "B").id
    b_session = uow.sessions.insert("b-s", "", b_project, {}, "B", user_id="alice").id
    uow.episodes.insert(b_session, "b's alice", "", {}, None, acts_for="alice")
    with key("b-alice"):
        started = await erasures.forget_user("alice", 0, "b-alice")
    receipt = await done(uow, started.id)
    assert receipt.tenant == "B" and receipt.counts.sessions == 1
    # Tenant A's alice is untouched, and tenant A's keys cannot read B's receipt.
    with key("a-alice"):
        assert len(await exported(uow, "alice")) > 0
    for who in ("a-star", "a-alice"):
        with key(who):
            await refused(erasures.get(started.id))


async def test_a_user_key_forgets_its_own_user_and_reads_only_its_receipts(uow, erasures):
    with key("a-alice"):
        started = await erasures.forget_user("alice", 0, "a-alice")
    assert started.user_id == "alice"
    with key("a-carol"):
        await refused(erasures.get(started.id))
    receipt = await done(uow, started.id)
    # The finished receipt keeps a digest, not the id: alice's key reads hers
    # back with her name; a "*" key reads it without; carol's never.
    with key("a-alice"):
        mine = await erasures.get(started.id)
    assert mine.user_id == "alice" and mine.counts == receipt.counts
    with key("a-star"):
        star = await erasures.get(started.id)
    assert star.user_id == "" and star.state == e.DONE
    with key("a-carol"):
        await refused(erasures.get(started.id))
        # Carol's things are all still there.
        assert any(isinstance(r, Memory) for r in await exported(uow, "carol"))


async def test_an_admin_lists_its_tenants_receipts_naming_a_user_only_when_asked(uow, erasures):
    with key("a-star"):
        started = await erasures.forget_user("carol", 0, "a-star")
    await done(uow, started.id)
    with key("a-admin"):
        listed = await erasures.list_receipts(0, "", "", "")
        named = await erasures.list_receipts(0, "", "", "carol")
        other = await erasures.list_receipts(0, "", "", "alice")
    assert [(r.id, r.user_id) for r in listed.items] == [(started.id, "")]  # no one named her
    assert [(r.id, r.user_id) for r in named.items] == [(started.id, "carol")]
    assert other.items == []
    with key("b-admin"):
        theirs = await erasures.list_receipts(0, "", "", "")
    assert theirs.items == []
