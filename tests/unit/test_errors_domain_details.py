"""The details the domain puts on its refusals, for a program to act on:
the memory cap as a QuotaFailure naming the owner and the limit
(domain/memories.py), a memory that does not exist as a ResourceInfo, and a
merge of missing entities naming each (domain/merges.py). On the fakes of
tests/fakes.py, with the inputs tests/e2e/api/test_error_details.py sent
over the wire; it keeps the typed-error test (the cap over the wire) and a
missing resource of each kind (the store's NotFound).
"""

from __future__ import annotations

from typing import Any

import pytest

from nexus_grpc.core.models import MemoryKind
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.graph import Graph
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.merges import Merges
from nexus_grpc.errors import ErrorInfo, FailedPrecondition, NotFound, QuotaViolation, ResourceInfo
from tests.fakes import FakeDatabase, FakeUnitOfWork

USER = int(MemoryKind.USER)


def memories(uow: FakeUnitOfWork, cap: int = 100) -> Memories:
    # Neither the embedder nor the vector index is read by these rules.
    return Memories(FakeDatabase(uow), JobSignals(), None, None, cap=cap)  # type: ignore[arg-type]


async def test_the_memory_cap_is_a_quota_failure_naming_the_owner_and_limit():
    m = memories(FakeUnitOfWork(), cap=1)
    memory: dict[str, Any] = {"kind": USER, "title": "t1", "content": "c", "user_id": "alice"}
    await m.create(dict(memory))
    with pytest.raises(FailedPrecondition) as err:
        await m.create({**memory, "title": "t2"})
    assert "the limit is 1 per user, project and agent" in err.value.message
    [quota, info] = err.value.details
    assert isinstance(quota, QuotaViolation)
    assert (quota.subject, quota.quota_id, quota.quota_value) == (
        "user:alice project:0 agent:",
        "memories-per-owner",
        1,
    )
    assert info == ErrorInfo("MEMORY_CAP_REACHED", {"kind": "USER"})
    assert (info.reason, info.domain) == ("MEMORY_CAP_REACHED", "nexus-grpc")


async def test_a_missing_memory_is_named_in_a_resource_info():
    with pytest.raises(NotFound) as err:
        await memories(FakeUnitOfWork()).get(555, "alice")
    assert err.value.resource == ResourceInfo(
        "memory", "555", description="memory 555 does not exist"
    )


async def test_a_merge_of_missing_entities_names_each():
    uow = FakeUnitOfWork()
    graph = Graph(FakeDatabase(uow), JobSignals(), None, None, None)  # type: ignore[arg-type]
    target = await graph.upsert_entity("Ada", "person", "", 0.0, 0)
    with pytest.raises(NotFound) as err:
        await Merges(FakeDatabase(uow), JobSignals()).merge(target.id, [9001, 9002])
    infos = [d for d in err.value.details if isinstance(d, ResourceInfo)]
    assert [(i.resource_type, i.resource_name) for i in infos] == [
        ("entity", "9001"),
        ("entity", "9002"),
    ]
