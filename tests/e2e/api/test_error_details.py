"""A refusal says what a program needs to act on it, as google.rpc error
details in the grpc-status-details-bin trailer: the field of a bad request
(BadRequest), the limit a call met (QuotaFailure), the resource that does not
exist (ResourceInfo), the reason (ErrorInfo). The Python client raises the
typed error for the status, with those details decoded.

Real server, real channels: the raw stubs read the trailer with grpcio-status,
as any grpc client would; the NexusClient reads it for its callers. The
details as values (the codec, each error's status code, the trailer beside
the x-request-id, the client's typed errors made from a code, what a
reworded or pickled error keeps) are tested in tests/unit/test_errors_details.py;
the details each refusal of the interceptors carries (a missing, unknown or
unpermitted key, the per-key, per-tenant and server caps, the watch-stream
caps) in tests/unit/test_auth_interceptor.py, tests/unit/test_limits_rules.py
and tests/unit/test_limits_watch_streams.py; the domain's own (the memory
cap's QuotaFailure, a merge's missing entities) in
tests/unit/test_errors_domain_details.py. Here, one refusal of each path
over the wire.
"""

from __future__ import annotations

import hashlib
import json
import uuid

import grpc
import pytest
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from nexus_grpc.client import (
    ErrorInfo,
    FieldViolation,
    NexusClient,
    NexusClientError,
    NexusFailedPrecondition,
    NexusInvalidArgument,
    NexusNotFound,
    NexusPermissionDenied,
    NexusResourceExhausted,
    NexusUnauthenticated,
    QuotaViolation,
    ResourceInfo,
)
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import start_harness, wait_until

USER = memory_pb2.MEMORY_KIND_USER


async def refusal(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value


def rich(exc: grpc.aio.AioRpcError) -> status_pb2.Status:
    """The google.rpc.Status of the trailer; grpcio-status checks that its code
    and message are the call's own."""
    status = rpc_status.from_call(exc)
    assert status is not None, f"no details on {exc.code().name}: {exc.details()}"
    return status


def unpacked(status: status_pb2.Status, cls: type[Message]) -> list:
    out = []
    for packed in status.details:
        if packed.Is(cls.DESCRIPTOR):
            message = cls()
            packed.Unpack(message)
            out.append(message)
    return out


def violated_fields(exc: grpc.aio.AioRpcError) -> list[str]:
    [bad] = unpacked(rich(exc), error_details_pb2.BadRequest)
    for v in bad.field_violations:
        # Each violation's description is the message (a restore puts the
        # record's index before it).
        assert v.description and v.description in exc.details()
    return [v.field for v in bad.field_violations]


def request_id(exc: grpc.aio.AioRpcError) -> str | None:
    return dict(exc.trailing_metadata() or ()).get("x-request-id")


# --- BadRequest -------------------------------------------------------------------------


async def test_a_bad_request_names_its_field_in_a_bad_request_detail(harness):
    h = harness
    blank_title = await refusal(
        h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(kind=USER, title="", content="c", user_id="alice")
            )
        )
    )
    assert blank_title.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The message is as it always was; the field is now said apart from it.
    assert blank_title.details() == "memory.title is required and must not be blank"
    assert violated_fields(blank_title) == ["memory.title"]
    assert request_id(blank_title), "the x-request-id trailer stays beside the details"

    spaced_user = await refusal(
        h.memory.ListMemories(
            memory_pb2.ListMemoriesRequest(scope=memory_pb2.MemoryScope(user_id=" bob"))
        )
    )
    assert violated_fields(spaced_user) == ["scope.user_id"]

    negative_page = await refusal(
        h.memory.ListProjects(memory_pb2.ListProjectsRequest(page_size=-1))
    )
    assert negative_page.details() == "page_size must not be negative, got -1"
    assert violated_fields(negative_page) == ["page_size"]

    # A refusal about a pair of fields names both.
    empty_scope = await refusal(
        h.memory.ListMemories(memory_pb2.ListMemoriesRequest(scope=memory_pb2.MemoryScope()))
    )
    assert violated_fields(empty_scope) == ["scope.project_id", "scope.user_id"]
    neither = await refusal(h.memory.GetSession(memory_pb2.GetSessionRequest()))
    assert violated_fields(neither) == ["id", "external_id"]

    # A field of a nested message, checked at the api layer.
    bad_ttl = await refusal(
        h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=USER, title="t", content="c", user_id="alice", ttl={"seconds": -5}
                )
            )
        )
    )
    assert violated_fields(bad_ttl) == ["memory.ttl"]


async def test_a_restore_record_error_keeps_its_field(harness):
    """RestoreProject rewords a record's refusal to name the record: the
    field violation goes with it."""
    h = harness
    records = [
        memory_pb2.RestoreProjectRequest(
            record=memory_pb2.ExportRecord(project=memory_pb2.Project(id=1, name="p"))
        ),
        memory_pb2.RestoreProjectRequest(
            record=memory_pb2.ExportRecord(
                memory=memory_pb2.Memory(
                    id=1, kind=USER, title="", content="c", user_id="u", project_id=1
                )
            )
        ),
    ]
    err = await refusal(h.memory.RestoreProject(iter(records)))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("record 1 (memory): memory.title is required")
    assert violated_fields(err) == ["memory.title"]


# --- ResourceInfo -----------------------------------------------------------------------


async def test_not_found_names_the_missing_resource_in_a_resource_info(harness):
    h = harness
    cases = [
        (h.memory.GetSession(memory_pb2.GetSessionRequest(id=98765)), "session", "98765"),
        (h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=4321)), "episode", "4321"),
        (h.memory.GetMemory(memory_pb2.GetMemoryRequest(id=555, user_id="alice")), "memory", "555"),
        (h.graph.GetEntity(graph_pb2.GetEntityRequest(id=777)), "entity", "777"),
        (h.memory.GetProject(memory_pb2.GetProjectRequest(id=31)), "project", "31"),
    ]
    external = str(uuid.uuid4())
    cases.append(
        (
            h.memory.GetSession(memory_pb2.GetSessionRequest(external_id=external)),
            "session",
            external,
        )
    )
    for call, resource_type, resource_name in cases:
        err = await refusal(call)
        assert err.code() == grpc.StatusCode.NOT_FOUND, err.details()
        [info] = unpacked(rich(err), error_details_pb2.ResourceInfo)
        assert (info.resource_type, info.resource_name) == (resource_type, resource_name)
        assert not unpacked(rich(err), error_details_pb2.BadRequest)


KEY_A = "error-details-key-a-000001"
ADMIN = "error-details-admin-00001"


def keys_file(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": KEY_A, "name": "a", "users": ["alice"]},
                    {
                        "key_sha256": hashlib.sha256(ADMIN.encode()).hexdigest(),
                        "name": "ops",
                        "users": [],
                        "admin": True,
                    },
                ]
            }
        )
    )
    return str(path)


# --- the Python client's typed errors ----------------------------------------------------


async def test_the_client_raises_the_typed_error_with_its_details(harness):
    h = harness
    async with NexusClient(h.target, timeout=10.0, retry=None) as client:
        with pytest.raises(NexusInvalidArgument) as bad:
            await client.create_memory(
                memory=memory_pb2.Memory(kind=USER, title="", content="c", user_id="alice")
            )
        err = bad.value
        assert isinstance(err, NexusClientError)  # existing handlers still catch it
        assert err.code == grpc.StatusCode.INVALID_ARGUMENT
        assert err.message == "memory.title is required and must not be blank"
        assert err.field_violations == (FieldViolation("memory.title", err.message),)
        assert err.request_id

        with pytest.raises(NexusNotFound) as missing:
            await client.get_session(id=98765)
        assert missing.value.resource_info == ResourceInfo(
            "session", "98765", description="session 98765 does not exist"
        )
        assert missing.value.field_violations == ()

        h.app.memories.cap = 1
        await client.create_memory(
            memory=memory_pb2.Memory(kind=USER, title="one", content="c", user_id="bob")
        )
        with pytest.raises(NexusFailedPrecondition) as capped:
            await client.create_memory(
                memory=memory_pb2.Memory(kind=USER, title="two", content="c", user_id="bob")
            )
        [quota] = capped.value.quota_violations
        assert (quota.quota_id, quota.quota_value) == ("memories-per-owner", 1)
        assert capped.value.error_info == ErrorInfo("MEMORY_CAP_REACHED", {"kind": "USER"})

        # A streamed call's refusal is typed the same way.
        with pytest.raises(NexusInvalidArgument) as streamed:
            await client.search_episodes(query="   ", session_id=1).collect()
        assert [v.field for v in streamed.value.field_violations] == ["query"]


async def test_the_client_types_refusals_of_caps_and_keys(tmp_path):
    h = await start_harness(
        tmp_path / "data",
        auth_keys_file=keys_file(tmp_path),
        max_concurrent_rpcs=1,
        max_concurrent_rpcs_per_key=0,  # the server's cap is what this proves
        max_concurrent_rpcs_per_tenant=0,
    )
    try:
        async with NexusClient(h.target, timeout=10.0, retry=None) as anonymous:
            with pytest.raises(NexusUnauthenticated) as err:
                await anonymous.list_projects()
            assert err.value.error_info == ErrorInfo("API_KEY_MISSING")
        async with NexusClient(h.target, api_key=KEY_A, timeout=10.0, retry=None) as client:
            with pytest.raises(NexusPermissionDenied):
                await client.get_memory(id=1, user_id="mallory")
            watch = client.watch_extractions()
            await watch.__aenter__()

            async def holds_the_slot() -> bool:
                return h.app.graph_events.watchers == 1

            await wait_until(holds_the_slot)
            with pytest.raises(NexusResourceExhausted) as full:
                await client.list_projects()
            assert full.value.quota_violations == (
                QuotaViolation(
                    "server", "concurrent calls on this server: at most 1", "max-concurrent-rpcs", 1
                ),
            )
            watch.cancel()
    finally:
        await h.close()
