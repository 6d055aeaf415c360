"""The Python client against a real server: enum fields take their labels and
come back as enum members whose str is the name; results are views that work
as the messages they wrap; empty answers say why (the x-nexus-* trailers).

Here each through a real server's answers; the client's own side without one, the
labels a request is built from, an unknown label's refusal, a view of a given message:
tests/unit/test_client_requests_and_views.py."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from nexus_grpc.client import (
    MemoryKind,
    MessageView,
    NexusClient,
    ProtoEnum,
    SearchMode,
    SearchSource,
    Tier,
)
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2


@pytest.fixture
async def client(harness):
    async with NexusClient(harness.target, retry=None) as c:
        yield c


async def test_enum_fields_take_short_and_full_labels_and_numbers(client):
    project = await client.create_project(project={"name": "labels"})
    given = [
        {"kind": "USER", "tier": "LONGTERM", "user_id": "alice"},
        {"kind": "MEMORY_KIND_USER", "tier": "TIER_SESSION", "user_id": "alice"},
        {"kind": "project", "tier": Tier.ARCHIVE, "project_id": project.id},
        {"kind": MemoryKind.PROJECT, "tier": 3, "project_id": project.id},
    ]
    made = []
    for n, values in enumerate(given):
        made.append(
            await client.create_memory(memory={**values, "title": f"t{n}", "content": f"c{n}"})
        )
    assert [(m.kind, m.tier) for m in made] == [
        (MemoryKind.USER, Tier.LONGTERM),
        (MemoryKind.USER, Tier.SESSION),
        (MemoryKind.PROJECT, Tier.ARCHIVE),
        (MemoryKind.PROJECT, Tier.LONGTERM),
    ]
    # A keyword argument of enum type takes a label too.
    hits = await client.search_memories(
        query="c0", scope={"user_id": "alice"}, mode="KEYWORD"
    ).collect()
    assert [h.memory.title for h in hits] == ["t0"]


async def test_results_read_enums_as_members_whose_str_is_the_name(client):
    project = await client.create_project(project={"name": "members"})
    session = await client.create_session(session={"project_id": project.id, "user_id": "al"})
    episode = await client.create_episode(session_id=session.id, user_message="Postgres 5433")
    # What the issue saw as `memory_state 1` and `sources [2]`.
    assert isinstance(episode.memory_state, ProtoEnum)
    assert str(episode.embedding_state) in ("PENDING", "DONE")
    assert f"{episode.memory_state}" == str(episode.memory_state) == "PENDING"
    assert episode.memory_state == memory_pb2.JOB_STATE_PENDING == 1  # still an int
    assert episode.memory_state.proto_name == "JOB_STATE_PENDING"
    [hit] = await client.search_episodes(
        query="postgres", session_id=session.id, mode=SearchMode.KEYWORD
    ).collect()
    assert hit.sources == [SearchSource.KEYWORD]
    assert [str(s) for s in hit.sources] == ["KEYWORD"]
    assert str(hit.episode.memory_state) == "PENDING"  # nested messages too
    assert json.dumps({"state": episode.memory_state}) == '{"state": 1}'


async def test_a_view_works_as_the_message_it_wraps(client):
    project = await client.create_project(project={"name": "views"})
    memory = await client.create_memory(
        memory={"kind": "PROJECT", "project_id": project.id, "title": "t", "content": "c"}
    )
    assert isinstance(memory, memory_pb2.Memory) and type(memory) is MessageView
    message = memory.to_message()
    assert type(message) is memory_pb2.Memory and memory == message
    assert memory.HasField("create_time") and "MEMORY_KIND_PROJECT" in str(memory)
    assert memory_pb2.Memory.FromString(memory.SerializeToString()) == memory
    assert pickle.loads(pickle.dumps(memory)) == memory
    assert copy.deepcopy(memory) == memory
    # Sent back as it is: the client's methods take views.
    memory.title = "renamed"
    updated = await client.update_memory(memory=memory, update_mask={"paths": ["title"]})
    assert updated.title == "renamed"
    # protobuf's own constructors take the message.
    request = memory_pb2.UpdateMemoryRequest(memory=memory.to_message())
    assert request.memory.title == "renamed"


async def test_empty_answers_carry_their_reason_and_selection_its_method(client):
    project = await client.create_project(project={"name": "empty"})
    scope = {"project_id": project.id, "user_id": "alice"}
    listed = await client.list_memories(scope=scope)
    assert list(listed.memories) == []
    assert listed.empty_reason is not None and listed.empty_reason.startswith("NOTHING_STORED")
    assert "x-request-id" in listed.trailers
    stream = client.select_memories(prompt="what do I like?", scope=scope)
    assert await stream.collect() == []
    assert stream.selection_method == "semantic"
    assert stream.empty_reason is not None and stream.empty_reason.startswith("NOTHING_STORED")
    await client.create_memory(memory={**scope, "kind": "USER", "title": "t", "content": "tea"})
    listed = await client.list_memories(scope=scope)
    assert len(listed.memories) == 1 and listed.empty_reason is None
