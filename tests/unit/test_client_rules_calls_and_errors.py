"""What the Python client (client/base.py) makes of a call and of its failure, with a
stand-in stub in place of the channel's: the deadline and the call metadata a call
is given, the trailers an answer carries, a stream read to its end, cancelled or
failed, and a failed RPC unpacked into ``NexusClientError``: its class by status,
the server's request id, the google.rpc details decoded.

A failure is the ``grpc.aio.AioRpcError`` gRPC raises, built here with the
metadata a server sends. (The client against a server: tests/e2e/client/test_client.py;
requests built and refused before a call: test_client_requests_and_views.py.)"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2

from nexus_grpc.client import (
    NexusClient,
    NexusClientError,
    NexusInvalidArgument,
    NexusNotFound,
    NexusResourceExhausted,
    NexusUnimplemented,
    SearchSource,
)
from nexus_grpc.client.base import _text_metadata
from nexus_grpc.client.connection import RetryPolicy, bearer_metadata, service_config
from nexus_grpc.client.views import (
    DEGRADED_KEY,
    EMPTY_REASON_KEY,
    SELECTION_METHOD_KEY,
    MessageView,
    view,
)
from nexus_grpc.errors import ErrorInfo, FieldViolation, QuotaViolation, ResourceInfo
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.status_details import pack


def rpc_error(
    code: grpc.StatusCode,
    details: str = "",
    *,
    initial: tuple[tuple[str, str | bytes], ...] = (),
    trailing: tuple[tuple[str, str | bytes], ...] = (),
) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(*initial), grpc.aio.Metadata(*trailing), details
    )


def status_trailer(code: grpc.StatusCode, message: str, details: list[Any]) -> tuple[str, bytes]:
    status = pack(code.value[0], message, details)
    return ("grpc-status-details-bin", status.SerializeToString())


class UnaryCall:
    """A unary call as gRPC returns it: awaited for the answer, then its trailers."""

    def __init__(self, answer: Any, trailers: tuple[tuple[str, str | bytes], ...] = ()) -> None:
        self.answer = answer
        self.trailers = trailers

    def __await__(self) -> Iterator[Any]:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer
        yield  # a generator: ``await`` takes its return value

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        return grpc.aio.Metadata(*self.trailers)


class StreamCall:
    """A server-streaming call: ``read()`` gives each item, then EOF or the failure."""

    def __init__(self, items: list[Any], trailers: tuple[tuple[str, str], ...] = ()) -> None:
        self.items = list(items)
        self.trailers = trailers
        self.cancelled = False

    async def read(self) -> Any:
        if self.cancelled:
            raise rpc_error(grpc.StatusCode.CANCELLED, "cancelled")
        if not self.items:
            return grpc.aio.EOF
        item = self.items.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        return grpc.aio.Metadata(*self.trailers)

    def cancel(self) -> bool:
        self.cancelled = True
        return True

    def done(self) -> bool:
        return self.cancelled


class Stub:
    """Every RPC of one service: records what it was given, answers what it holds."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any, dict[str, Any]]] = []
        self.answers: dict[str, Any] = {}

    def __getattr__(self, rpc: str) -> Any:
        def method(message: Any, **options: Any) -> Any:
            self.sent.append((rpc, message, options))
            return self.answers[rpc]

        return method


class NoChannel:
    """Where the channel would be: a stub made on it fails, so no call leaves the process."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the channel was used ({name})")


@pytest.fixture
def stubs() -> dict[str, Stub]:
    return {"MemoryService": Stub(), "GraphService": Stub(), "Health": Stub()}


def client_on(stubs: dict[str, Stub], **settings: Any) -> NexusClient:
    client = NexusClient("127.0.0.1:1", **settings)
    client._channel = NoChannel()  # type: ignore[assignment]
    client._stubs = stubs  # what stub() hands out
    return client


# --- a failure's class, message and request id -------------------------------------------


def test_a_failure_is_the_class_of_its_status_and_still_a_nexus_client_error():
    assert type(NexusClientError(grpc.StatusCode.NOT_FOUND, "gone")) is NexusNotFound
    assert type(NexusClientError(grpc.StatusCode.UNIMPLEMENTED, "x")) is NexusUnimplemented
    # A status without a class of its own stays the base class.
    assert type(NexusClientError(grpc.StatusCode.DATA_LOSS, "x")) is NexusClientError
    error = NexusClientError(grpc.StatusCode.NOT_FOUND, "episode 404 not found", "r-9")
    assert isinstance(error, NexusClientError)
    assert str(error) == "NOT_FOUND: episode 404 not found (request id r-9)"
    assert str(NexusClientError(grpc.StatusCode.INTERNAL, "boom")) == "INTERNAL: boom"


def test_the_request_id_comes_from_the_trailers_else_the_headers():
    from_trailers = NexusClientError.from_rpc_error(
        rpc_error(grpc.StatusCode.NOT_FOUND, "episode 404 not found",
                  initial=(("x-request-id", "early"),), trailing=(("x-request-id", "late"),))
    )  # fmt: skip
    assert type(from_trailers) is NexusNotFound
    assert (from_trailers.message, from_trailers.request_id) == ("episode 404 not found", "late")
    from_headers = NexusClientError.from_rpc_error(
        rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "bad", initial=(("x-request-id", "early"),))
    )
    assert from_headers.request_id == "early"
    # An RPC the server does not have: no request id, no message.
    missing = NexusClientError.from_rpc_error(rpc_error(grpc.StatusCode.UNIMPLEMENTED))
    assert type(missing) is NexusUnimplemented
    assert (missing.code, missing.request_id, missing.message) == (
        grpc.StatusCode.UNIMPLEMENTED, None, "",
    )  # fmt: skip


def test_the_status_details_are_decoded_into_the_errors_fields():
    sent = [
        FieldViolation("memory.title", "must not be blank"),
        ResourceInfo("project", "7"),
        ErrorInfo("OVER_CAP", {"limit": "3"}),
        QuotaViolation("project 7", "at its cap", "memories", 3),
    ]
    trailer = status_trailer(grpc.StatusCode.INVALID_ARGUMENT, "bad", sent)
    error = NexusClientError.from_rpc_error(
        rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "bad", trailing=(trailer,))
    )
    assert type(error) is NexusInvalidArgument
    assert sorted(map(repr, error.details)) == sorted(map(repr, sent))  # grouped by kind
    assert error.field_violations == (sent[0],)
    assert error.resource_info == sent[1]
    assert error.error_info == sent[2]
    assert error.quota_violations == (sent[3],)
    assert error.precondition_violations == ()
    assert error.status is not None and error.status.message == "bad"
    # The decoded details travel with the error; the status proto stays behind.
    copied = pickle.loads(pickle.dumps(error))
    assert type(copied) is NexusInvalidArgument
    assert (copied.details, copied.request_id, copied.status) == (error.details, None, None)


def test_a_status_trailer_that_is_malformed_or_contradicts_the_call_is_ignored():
    other_code = status_trailer(grpc.StatusCode.NOT_FOUND, "x", [ResourceInfo("project", "1")])
    contradicted = NexusClientError.from_rpc_error(
        rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy", trailing=(other_code,))
    )
    assert type(contradicted) is NexusResourceExhausted
    assert (contradicted.details, contradicted.status) == ((), None)
    garbled = NexusClientError.from_rpc_error(
        rpc_error(grpc.StatusCode.INTERNAL, "x",
                  trailing=(("grpc-status-details-bin", b"\xff\xff not a status"),))
    )  # fmt: skip
    assert (garbled.details, garbled.status) == ((), None)
    bare = NexusClientError.from_rpc_error(rpc_error(grpc.StatusCode.NOT_FOUND, "gone"))
    assert (bare.details, bare.resource_info, bare.error_info) == ((), None, None)


def test_an_answers_trailers_are_its_text_metadata_the_last_of_each_key():
    assert _text_metadata(
        [("a", "1"), ("b-bin", b"\x00"), ("a", "2"), (EMPTY_REASON_KEY, "NO_MATCH: x")]
    ) == {"a": "2", EMPTY_REASON_KEY: "NO_MATCH: x"}
    assert _text_metadata(None) == {}


# --- what a call is given -------------------------------------------------------------


async def test_a_call_gets_the_clients_deadline_its_key_and_its_own_metadata(stubs):
    memory = stubs["MemoryService"]
    memory.answers["GetEpisode"] = UnaryCall(memory_pb2.Episode(id=1))
    client = client_on(stubs, api_key="sekret", timeout=5.0, wait_for_ready=True)
    await client.get_episode(id=1, call_metadata=[("x-trace", "abc")])
    await client.get_episode(id=1, timeout=0.5)
    await client.get_episode(id=1, timeout=None)
    options = [sent[2] for sent in memory.sent]
    assert [o["timeout"] for o in options] == [5.0, 0.5, None]
    assert options[0]["metadata"] == (("authorization", "Bearer sekret"), ("x-trace", "abc"))
    assert options[1]["metadata"] == (("authorization", "Bearer sekret"),)
    assert all(o["wait_for_ready"] is True for o in options)
    assert [sent[1] for sent in memory.sent] == [memory_pb2.GetEpisodeRequest(id=1)] * 3
    # Without a key and without call metadata, none is sent.
    await client_on(stubs).get_episode(id=1)
    assert memory.sent[-1][2]["metadata"] is None


async def test_the_watch_stream_has_no_default_deadline_but_takes_a_given_one(stubs):
    graph, memory = stubs["GraphService"], stubs["MemoryService"]
    graph.answers["WatchExtractions"] = StreamCall([])
    memory.answers["SearchEpisodes"] = StreamCall([])
    client = client_on(stubs, timeout=5.0)
    await client.watch_extractions(session_id=5).collect()
    await client.watch_extractions(session_id=5, timeout=0.2).collect()
    await client.search_episodes(query="x").collect()
    assert [sent[2]["timeout"] for sent in graph.sent] == [None, 0.2]
    assert [sent[2]["timeout"] for sent in memory.sent] == [5.0]


async def test_metadata_as_call_metadata_still_works_and_says_it_is_deprecated(stubs):
    memory = stubs["MemoryService"]
    memory.answers["GetEpisode"] = UnaryCall(memory_pb2.Episode(id=1))
    memory.answers["CreateEpisode"] = UnaryCall(memory_pb2.Episode(id=2))
    client = client_on(stubs, api_key="sekret")
    with pytest.warns(DeprecationWarning, match="use call_metadata=") as caught:
        await client.get_episode(id=1, metadata=[("x-trace", "old")])
    assert "the request's own field" not in str(caught[0].message)
    assert memory.sent[-1][2]["metadata"][-1] == ("x-trace", "old")
    with pytest.warns(DeprecationWarning, match="the request's own field"):
        await client.create_episode(session_id=1, user_message="z", metadata=[("x-trace", "older")])
    assert memory.sent[-1][2]["metadata"][-1] == ("x-trace", "older")
    assert not memory.sent[-1][1].HasField("metadata")
    # A mapping there is the request's field, beside the call's own metadata.
    await client.create_episode(session_id=1, user_message="y", metadata={"source": "both"},
                                call_metadata=[("x-trace", "def")])  # fmt: skip
    rpc, request, options = memory.sent[-1]
    assert request.metadata["source"] == "both"
    assert options["metadata"] == (("authorization", "Bearer sekret"), ("x-trace", "def"))


async def test_an_answer_carries_its_trailers_and_a_failure_its_grpc_cause(stubs):
    memory = stubs["MemoryService"]
    memory.answers["ListMemories"] = UnaryCall(
        memory_pb2.ListMemoriesResponse(), ((EMPTY_REASON_KEY, "NOTHING_STORED: none"),)
    )
    client = client_on(stubs)
    listed = await client.list_memories()
    assert listed.empty_reason == "NOTHING_STORED: none"
    failure = rpc_error(grpc.StatusCode.NOT_FOUND, "episode 404 not found",
                        trailing=(("x-request-id", "r-1"),))  # fmt: skip
    memory.answers["GetEpisode"] = UnaryCall(failure)
    with pytest.raises(NexusNotFound) as info:
        await client.get_episode(id=404)
    assert info.value.request_id == "r-1"
    assert info.value.__cause__ is failure


async def test_health_answers_the_status_by_name(stubs):
    stubs["Health"].answers["Check"] = UnaryCall(
        health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.NOT_SERVING)
    )
    client = client_on(stubs)
    assert await client.check_health("nexus.memory.v1.MemoryService") == "NOT_SERVING"
    assert stubs["Health"].sent[0][1] == health_pb2.HealthCheckRequest(
        service="nexus.memory.v1.MemoryService"
    )
    with pytest.raises(ValueError, match="unknown service 'Nope'"):
        NexusClient("127.0.0.1:1").stub("Nope")


def test_a_copy_keeps_the_settings_and_has_no_channel_of_its_own_yet():
    client = NexusClient("h:1", api_key="k", timeout=3.0, wait_for_ready=True,
                         options=[("grpc.lb_policy_name", "round_robin")])  # fmt: skip
    copied = client.copy()
    assert copied is not client and type(copied) is NexusClient
    assert (copied.target, copied.timeout, copied._wait_for_ready, copied._options) == (
        "h:1", 3.0, True, (("grpc.lb_policy_name", "round_robin"),),
    )  # fmt: skip
    assert copied._base_metadata == (("authorization", "Bearer k"),)
    assert copied._channel is None and copied.opened_on() is None
    assert not copied.secure and NexusClient("h:1", root_certificates=b"pem").secure


# --- a stream -------------------------------------------------------------------------


async def test_a_stream_read_to_its_end_says_what_its_trailers_said(stubs):
    memory = stubs["MemoryService"]
    memory.answers["SelectMemories"] = StreamCall(
        [], ((EMPTY_REASON_KEY, "NOTHING_STORED: none"), (SELECTION_METHOD_KEY, "semantic"),
             (DEGRADED_KEY, "no model"))
    )  # fmt: skip
    stream = client_on(stubs).select_memories(prompt="x")
    assert stream.trailers is None and stream.empty_reason is None
    assert await stream.collect() == []
    assert stream.empty_reason == "NOTHING_STORED: none"
    assert stream.selection_method == "semantic" and stream.degraded_reason == "no model"
    assert await stream.collect() == []  # ended: iterating again gives nothing


async def test_a_stream_starts_on_first_use_and_a_cancel_ends_it(stubs):
    graph = stubs["GraphService"]
    events = [graph_pb2.ExtractionEvent(event_id=1), graph_pb2.ExtractionEvent(event_id=2)]
    graph.answers["WatchExtractions"] = StreamCall(events)
    client = client_on(stubs)
    stream = client.watch_extractions(session_id=-1)
    assert graph.sent == []  # nothing started yet
    assert stream.cancel() is False  # not started: nothing to cancel
    assert [e async for e in stream] == []
    started = client.watch_extractions(session_id=-1)
    async with started:
        assert len(graph.sent) == 1
        assert (await started.__anext__()).event_id == 1
        assert started.cancel() is True
        assert [e async for e in started] == []


async def test_a_stream_that_fails_raises_nexus_client_error_once(stubs):
    memory = stubs["MemoryService"]
    memory.answers["SearchEpisodes"] = StreamCall([
        memory_pb2.SearchHit(snippet="a"),
        rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "query is blank",
                  trailing=(("x-request-id", "r-2"),)),
    ])  # fmt: skip
    stream = client_on(stubs).search_episodes(query="a")
    seen = []
    with pytest.raises(NexusInvalidArgument) as info:
        async for hit in stream:
            seen.append(hit.snippet)
    assert seen == ["a"] and info.value.request_id == "r-2"
    assert [h async for h in stream] == []


# --- the channel's service config ------------------------------------------------------


def test_every_channel_checks_the_whole_servers_health_so_round_robin_skips_a_sick_one():
    plain = json.loads(service_config(None))
    assert plain == {"healthCheckConfig": {"serviceName": ""}}  # no retries: tried once
    retried = json.loads(service_config(RetryPolicy(initial_backoff=0.1, max_backoff=5.0)))
    assert retried["healthCheckConfig"] == {"serviceName": ""}
    policy = retried["methodConfig"][0]["retryPolicy"]
    assert (policy["initialBackoff"], policy["maxBackoff"]) == ("0.1s", "5s")
    assert policy["maxAttempts"] == 5 and policy["backoffMultiplier"] == 2.0


def test_a_key_travels_as_a_bearer_token_and_no_key_as_nothing():
    assert bearer_metadata("sekret") == (("authorization", "Bearer sekret"),)
    assert bearer_metadata("") == () and bearer_metadata(None) == ()


def test_an_enum_value_newer_than_this_client_reads_as_its_number():
    hit = view(memory_pb2.SearchHit(sources=[memory_pb2.SEARCH_SOURCE_KEYWORD, 99]))
    assert hit.sources == [SearchSource.KEYWORD, 99]
    assert type(hit.sources[1]) is int
    episode = view(memory_pb2.Episode(memory_state=42))
    assert episode.memory_state == 42 and type(episode.memory_state) is int


def test_a_streamed_item_with_no_enum_to_show_stays_the_message_and_an_answer_is_a_view():
    bare = memory_pb2.DeleteMemoryResponse()
    assert view(bare) is bare
    assert type(view(bare, {})) is MessageView
