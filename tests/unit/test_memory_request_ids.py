"""A CreateMemory retried with its request_id (domain/memories.py ``create``,
AIP-155), decided by the domain on the fakes of tests/fakes.py.

The same call again answers with the first call's memory and stores nothing;
the same owner's key sent with a different memory is refused, naming what
differs; another owner's key is another key, neither refused nor revealed.
What a client sees of it (ALREADY_EXISTS over gRPC) is
tests/e2e/service/test_memories.py's ``test_request_id_is_idempotent``.
"""

from __future__ import annotations

from typing import Any

import pytest

from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.memories import Memories
from nexus_grpc.errors import AlreadyExists
from tests.fakes import FakeDatabase, FakeUnitOfWork

P, U = int(MemoryKind.PROJECT), int(MemoryKind.USER)


def world() -> tuple[FakeUnitOfWork, Memories, int]:
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p1"}).id
    # Neither the embedder nor the vector index is read by these rules.
    m = Memories(FakeDatabase(uow), JobSignals(), None, None)  # type: ignore[arg-type]
    return uow, m, project


async def test_the_same_call_again_answers_with_the_first_memory_and_stores_nothing():
    uow, m, p1 = world()
    values = {"kind": P, "title": "t", "content": "c", "project_id": p1}
    first = await m.create(values, "r-1")
    assert (await m.create(values, "r-1")).id == first.id
    assert len(uow.memories.rows) == 1


async def test_the_owners_key_sent_with_another_memory_is_refused_naming_what_differs():
    uow, m, p1 = world()
    values: dict[str, Any] = {"kind": P, "title": "t", "content": "c", "project_id": p1}
    first = await m.create(values, "r-1")
    for change in (
        {"content": "changed"},
        {"tier": int(Tier.ARCHIVE)},
        {"agent_id": "a2"},
        {"title": "other", "confidence": 0.5},
    ):
        with pytest.raises(AlreadyExists) as err:
            await m.create({**values, **change}, "r-1")
        assert err.value.message == (
            f"request_id 'r-1' was already used for memory {first.id},"
            f" with a different {', '.join(change)}"
        )
    assert list(uow.memories.rows) == [first.id]


async def test_another_owners_key_is_another_key():
    uow, m, p1 = world()
    project_memory = await m.create(
        {"kind": P, "title": "t", "content": "c", "project_id": p1}, "r-1"
    )

    def users(user: str) -> dict[str, Any]:
        return {"kind": U, "title": "x", "content": "c", "user_id": user}

    bobs = await m.create(users("bob"), "r-1")
    assert bobs.id != project_memory.id and bobs.user_id == "bob"
    assert (await m.create(users("bob"), "r-1")).id == bobs.id
    carols = await m.create(users("carol"), "r-1")
    assert carols.id not in (project_memory.id, bobs.id)
    assert len(uow.memories.rows) == 3
