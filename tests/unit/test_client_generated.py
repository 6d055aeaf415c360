"""nexus_grpc/client/__init__.py is generated from the descriptors: a method for every
RPC, typed keywords, proto docs; and the retry policy the connection hands gRPC.

No server: what the generator wrote and the connection's service config, read as
Python objects. (The client against a server: tests/e2e/client/test_client.py,
test_client_retries.py and test_client_speaks_python.py.)"""

from __future__ import annotations

import inspect
import json

from nexus_grpc.client import RPCS, NexusClient
from nexus_grpc.client.base import ClientBase
from nexus_grpc.client.connection import SERVICES, RetryPolicy, retryable_methods, service_config
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2


def test_every_rpc_has_a_real_method():
    services = {
        "MemoryService": memory_pb2.DESCRIPTOR.services_by_name["MemoryService"],
        "GraphService": graph_pb2.DESCRIPTOR.services_by_name["GraphService"],
        "SummaryService": summary_pb2.DESCRIPTOR.services_by_name["SummaryService"],
    }
    expected = {
        (service, method.name, method.server_streaming)
        for service, descriptor in services.items()
        for method in descriptor.methods
    }
    assert {(s, r, streaming) for _, s, r, streaming in RPCS} == expected
    for name, _service, rpc, streaming in RPCS:
        method = NexusClient.__dict__.get(name)
        assert method is not None, name
        assert method.__name__ == name
        assert rpc in (method.__doc__ or "")
        assert inspect.iscoroutinefunction(method) is (not streaming), name
    for name in ("create_project", "search_episodes", "watch_extractions",
                 "summarize_project", "check_health"):  # fmt: skip
        assert callable(getattr(NexusClient, name))


def test_every_request_field_is_a_typed_keyword_parameter():
    for name, service, rpc, _ in RPCS:
        method = SERVICES[service].methods_by_name[rpc]
        params = inspect.signature(getattr(NexusClient, name)).parameters
        if method.client_streaming:
            # An iterable of requests, positional; no per-field keywords.
            assert params["requests"].kind is inspect.Parameter.POSITIONAL_ONLY, name
            assert set(params) == {
                "self", "requests", "timeout", "call_metadata", "metadata"
            }, name  # fmt: skip
            continue
        for field in method.input_type.fields:
            assert field.name in params, (name, field.name)
            assert params[field.name].kind is inspect.Parameter.KEYWORD_ONLY
            assert params[field.name].default is None
        assert params["request"].kind is inspect.Parameter.POSITIONAL_ONLY
        # gRPC call metadata has a name no request field has.
        assert params["call_metadata"].kind is inspect.Parameter.KEYWORD_ONLY, name
    annotations = inspect.get_annotations(NexusClient.create_episode)
    assert annotations["session_id"] == "int | None"
    # The request's field, never the call option.
    assert annotations["metadata"] == "struct_pb2.Struct | Mapping[str, Any] | None"
    assert annotations["call_metadata"] == "CallMetadata"
    assert annotations["return"] == "memory_pb2.Episode"
    # The call option's deprecated spelling, where no field takes the name.
    assert inspect.get_annotations(NexusClient.get_episode)["metadata"] == "CallMetadata"
    assert inspect.get_annotations(NexusClient.search_episodes)["mode"] == (
        "SearchMode | str | int | None"
    )
    assert inspect.get_annotations(NexusClient.search_episodes)["return"] == (
        "ServerStream[memory_pb2.SearchHit]"
    )
    assert inspect.get_annotations(NexusClient.import_episodes)["return"] == (
        "memory_pb2.ImportEpisodesResponse"
    )


def test_docstrings_carry_the_proto_comments():
    doc = NexusClient.create_episode.__doc__ or ""
    assert "MemoryService.CreateEpisode" in doc
    assert "Returns as soon as the episode is durable" in doc  # the rpc's comment
    assert "A retry with the same request_id returns the first episode." in doc  # a field's


def test_the_client_is_the_runtime_plus_generated_methods():
    assert issubclass(NexusClient, ClientBase)
    generated = {n for n, v in vars(NexusClient).items() if inspect.isfunction(v)}
    assert generated == {name for name, *_ in RPCS}


def test_an_empty_request_id_is_filled_in_and_the_callers_message_kept():
    request = memory_pb2.CreateEpisodeRequest(session_id=1, user_message="x")
    filled = ClientBase._with_request_id(request)
    assert filled.request_id and request.request_id == ""
    assert ClientBase._with_request_id(filled) is filled  # an id the caller chose stays
    other = ClientBase._with_request_id(memory_pb2.CreateEpisodeRequest(session_id=1))
    assert other.request_id != filled.request_id
    get = memory_pb2.GetEpisodeRequest(id=1)
    assert ClientBase._with_request_id(get) is get  # no such field: untouched


def test_only_calls_safe_to_repeat_are_retried():
    methods = {m for _, m in retryable_methods()}
    # Reads, and the creates the server deduplicates by request_id.
    assert {
        "GetEpisode",
        "ListEpisodes",
        "SearchEpisodes",
        "WatchExtractions",
        "GetServiceStatus",
        "Check",
        "CreateEpisode",
        "CreateMemory",
    } <= methods
    # Writes that could apply twice or answer differently on a repeat.
    assert not methods & {
        "CreateSession",
        "CreateProject",
        "UpdateMemory",
        "DeleteEpisode",
        "UpsertEntity",
        "SummarizeSession",
        "SummarizeProject",
        "ExtractEpisode",
        "ReconcileIndex",
        "CreateSummary",
    }
    config = json.loads(service_config(RetryPolicy(max_attempts=3, initial_backoff=0.25)))
    policy = config["methodConfig"][0]["retryPolicy"]
    assert policy["maxAttempts"] == 3
    assert policy["initialBackoff"] == "0.25s"
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
