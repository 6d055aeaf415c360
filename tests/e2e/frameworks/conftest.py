"""Fixtures the framework adapters' tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import Harness, index_idle, wait_until


@pytest.fixture
async def client(harness: Harness) -> AsyncIterator[NexusClient]:
    """A typed client on the harness, without retries: a refusal is one call's answer."""
    async with NexusClient(harness.target, retry=None) as c:
        yield c


async def project_named(client: NexusClient, name: str) -> memory_pb2.Project | None:
    page = await client.list_projects(page_size=1000)
    found = [p for p in page.projects if p.name == name]
    assert len(found) <= 1, f"{len(found)} projects named {name!r}"
    return found[0] if found else None


async def all_memories(
    client: NexusClient, project_id: int, user_id: str = ""
) -> list[memory_pb2.Memory]:
    """Every memory of the project (and of ``user_id``), archived included."""
    page = await client.list_memories(
        scope=memory_pb2.MemoryScope(project_id=project_id, user_id=user_id, include_archived=True),
        page_size=1000,
    )
    return list(page.memories)


async def indexed(h: Harness) -> None:
    """Every memory written so far is in the vector index (semantic search sees it)."""
    await wait_until(lambda: index_idle(h))


def teach(stub, user_message: str, fact: str) -> None:
    """The LLM stand-in's extraction of ``user_message``: one lasting fact about the
    user (a memory candidate), quoting them, and no entities."""
    candidate = {
        "about": "user",
        "title": fact[:30],
        "content": fact,
        "tier": "longterm",
        "quote": user_message[:40],
    }
    stub.add_rule(
        {"entities": [], "relationships": [], "ended": [], "memories": [candidate]},
        contains=f"User message:\n{user_message}\n",
    )


async def formed_memories(
    client: NexusClient, project_id: int, user_id: str, n: int = 1
) -> list[memory_pb2.Memory]:
    """The user's USER memories once ``n`` have formed (formation runs in the background)."""

    async def enough() -> list[memory_pb2.Memory] | None:
        page = await client.list_memories(
            scope=memory_pb2.MemoryScope(project_id=project_id, user_id=user_id),
            kind=memory_pb2.MEMORY_KIND_USER,
            page_size=100,
        )
        return list(page.memories) if len(page.memories) >= n else None

    return await wait_until(enough, timeout=30)
