"""What the Python client does on its own side of a call (client/base.py, views.py,
enums.py), without a server: a request built from keywords, a mapping or a message,
enum fields given as labels, the refusals made before a call, and the views an answer
is read through (enum members whose str is the name, the message's own behaviour, the
trailers' empty reason).

Each refusal below is raised before the client opens its channel; each view wraps a
message made here, as the client wraps what a call answered. (The client against a
server: tests/e2e/client/test_client.py and test_client_speaks_python.py.)"""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from nexus_grpc.client import MemoryKind, MessageView, NexusClient, ProtoEnum, SearchSource, Tier
from nexus_grpc.client.views import EMPTY_REASON_KEY, plain_fields, view
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2


@pytest.fixture
def client() -> NexusClient:
    """A client whose channel is never opened: nothing listens at its target."""
    return NexusClient("127.0.0.1:1")


async def test_request_and_kwargs_together_is_a_type_error(client):
    with pytest.raises(TypeError):
        await client.get_episode(memory_pb2.GetEpisodeRequest(id=1), id=2)
    with pytest.raises(TypeError, match="expected GetEpisodeRequest, got GetProjectRequest"):
        await client.get_episode(memory_pb2.GetProjectRequest(id=1))
    assert client._channel is None


async def test_call_metadata_given_as_a_requests_field_it_lacks_is_a_type_error(client):
    # GetEpisodeRequest has no metadata field: a mapping there is not call metadata.
    with pytest.raises(TypeError, match="GetEpisodeRequest has no metadata field"):
        await client.get_episode(id=1, metadata={"x-trace": "abc"})
    with pytest.raises(TypeError, match="not both"):
        await client.create_episode(
            memory_pb2.CreateEpisodeRequest(session_id=1), metadata={"source": "x"}
        )
    with (
        pytest.warns(DeprecationWarning, match="use call_metadata="),
        pytest.raises(TypeError, match="gRPC call metadata given twice"),
    ):
        await client.get_episode(id=1, metadata=[("x-trace", "old")], call_metadata=[("a", "b")])
    assert client._channel is None


async def test_an_unknown_label_names_the_field_and_the_valid_labels(client):
    with pytest.raises(ValueError) as info:
        await client.create_memory(memory={"kind": "USR", "title": "t", "content": "c"})
    message = str(info.value)
    assert message.startswith("memory.kind: unknown MemoryKind label 'USR'")
    assert "valid labels: UNSPECIFIED, PROJECT, USER" in message
    assert "MEMORY_KIND_PROJECT, MEMORY_KIND_USER" in message
    with pytest.raises(ValueError, match="mode: unknown SearchMode label 'FUZZY'"):
        await client.search_episodes(query="x", session_id=1, mode="FUZZY").collect()
    assert client._channel is None


def test_enum_fields_take_short_and_full_labels_members_and_numbers():
    given = [
        {"kind": "USER", "tier": "LONGTERM"},
        {"kind": "MEMORY_KIND_USER", "tier": "TIER_SESSION"},
        {"kind": "project", "tier": Tier.ARCHIVE},
        {"kind": MemoryKind.PROJECT, "tier": 3},
    ]
    built = [memory_pb2.Memory(**plain_fields(memory_pb2.Memory.DESCRIPTOR, g)) for g in given]
    assert [(m.kind, m.tier) for m in built] == [
        (memory_pb2.MEMORY_KIND_USER, memory_pb2.TIER_LONGTERM),
        (memory_pb2.MEMORY_KIND_USER, memory_pb2.TIER_SESSION),
        (memory_pb2.MEMORY_KIND_PROJECT, memory_pb2.TIER_ARCHIVE),
        (memory_pb2.MEMORY_KIND_PROJECT, memory_pb2.TIER_LONGTERM),
    ]
    # Nested messages given as mappings, and views of earlier answers, too.
    request = plain_fields(
        memory_pb2.CreateMemoryRequest.DESCRIPTOR, {"memory": {"kind": "USER", "title": "t"}}
    )
    assert memory_pb2.CreateMemoryRequest(**request).memory.kind == memory_pb2.MEMORY_KIND_USER
    earlier = view(memory_pb2.Memory(title="kept"), {})
    assert (
        memory_pb2.UpdateMemoryRequest(
            **plain_fields(memory_pb2.UpdateMemoryRequest.DESCRIPTOR, {"memory": earlier})
        ).memory.title
        == "kept"
    )


def test_answers_read_enums_as_members_whose_str_is_the_name():
    episode = view(
        memory_pb2.Episode(memory_state=memory_pb2.JOB_STATE_PENDING, user_message="Postgres")
    )
    assert isinstance(episode.memory_state, ProtoEnum)
    assert f"{episode.memory_state}" == str(episode.memory_state) == "PENDING"
    assert episode.memory_state == memory_pb2.JOB_STATE_PENDING == 1  # still an int
    assert episode.memory_state.proto_name == "JOB_STATE_PENDING"
    assert json.dumps({"state": episode.memory_state}) == '{"state": 1}'
    hit = view(
        memory_pb2.SearchHit(
            episode=episode.to_message(), sources=[memory_pb2.SEARCH_SOURCE_KEYWORD]
        )
    )
    assert hit.sources == [SearchSource.KEYWORD]
    assert [str(s) for s in hit.sources] == ["KEYWORD"]
    assert str(hit.episode.memory_state) == "PENDING"  # nested messages too


def test_a_view_works_as_the_message_it_wraps():
    message = memory_pb2.Memory(kind=memory_pb2.MEMORY_KIND_PROJECT, title="t", content="c")
    message.create_time.FromSeconds(1)
    memory = view(message, {"x-request-id": "r1"})
    assert isinstance(memory, memory_pb2.Memory) and type(memory) is MessageView
    assert type(memory.to_message()) is memory_pb2.Memory and memory == message
    assert memory.HasField("create_time") and "MEMORY_KIND_PROJECT" in str(memory)
    assert memory_pb2.Memory.FromString(memory.SerializeToString()) == memory
    assert pickle.loads(pickle.dumps(memory)) == memory
    assert copy.deepcopy(memory) == memory and copy.deepcopy(memory).trailers == memory.trailers
    memory.title = "renamed"  # written through to the message
    assert message.title == "renamed"


def test_an_empty_answer_carries_the_reason_its_trailers_gave():
    listed = view(memory_pb2.ListMemoriesResponse(), {EMPTY_REASON_KEY: "NOTHING_STORED: none"})
    assert listed.empty_reason == "NOTHING_STORED: none"
    assert listed.trailers == {EMPTY_REASON_KEY: "NOTHING_STORED: none"}
    assert view(memory_pb2.ListMemoriesResponse(), {}).empty_reason is None
