"""What a call's answer carries beside its messages, decided without a
server: the ``x-nexus-*`` trailers a servicer sets (api/trailers.py), and the
status the service interceptor (api/interceptors.py) gives a call whose
request cannot be decoded, whose servicer raises a domain error or an
unexpected one, and how it counts a streamed call. A context that records
what is set and the abort (tests/unit/grpc_contexts.py's
InterceptedContext) stands in for grpc's.

The caps, the request id and the response-size check are
tests/unit/test_limits_rules.py's; the wiring (the trailers and statuses as
a client reads them) stays in tests/e2e/api/test_interceptors.py and
test_error_details.py.
"""

from __future__ import annotations

import logging

import grpc
import grpc.aio
import pytest

from nexus_grpc.api import trailers
from nexus_grpc.api.interceptors import ServiceInterceptor
from nexus_grpc.errors import NotFound
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.rpc.requests import RequestObserver
from tests.unit.grpc_contexts import Aborted, InterceptedContext

METHOD = "/nexus.memory.v1.MemoryService/ListProjects"


# Trailers --------------------------------------------------------------------


def test_a_trailer_is_added_beside_those_already_set():
    context = InterceptedContext((("x-request-id", "r-1"),))
    trailers.add(context, trailers.DEGRADED, "semantic search unavailable")
    trailers.add(context, trailers.SELECTION_METHOD, "llm")
    assert context.trailers == (
        ("x-request-id", "r-1"),
        (trailers.DEGRADED, "semantic search unavailable"),
        (trailers.SELECTION_METHOD, "llm"),
    )


def test_a_trailer_set_again_replaces_its_value():
    context = InterceptedContext((("x-request-id", "r-1"), (trailers.EMPTY_REASON, "first")))
    reporter = trailers.reporter(context, trailers.EMPTY_REASON)
    reporter("NO_MEMORIES: second")
    assert context.trailers == (
        ("x-request-id", "r-1"),
        (trailers.EMPTY_REASON, "NO_MEMORIES: second"),
    )


def test_a_trailer_is_one_line_of_ascii_without_credentials_and_cut_short():
    context = InterceptedContext()
    trailers.add(context, trailers.DEGRADED, "down:\n  http://u:hunter2@embedder:8080/v1  \tcafé")
    [(_, shown)] = context.trailers
    assert shown == "down: http://***@embedder:8080/v1 caf?"
    trailers.add(context, trailers.DEGRADED, "x" * 2000)
    [(_, long)] = context.trailers
    assert long == "x" * trailers.MAX_CHARS


# The interceptor's outcomes ----------------------------------------------------


class Details:
    def __init__(self, method: str = METHOD) -> None:
        self.method = method
        self.invocation_metadata = ()


class Recorder(RequestObserver):
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        self.seen.append(("observed", code))

    def stream_started(self, method: str) -> None:
        self.seen.append(("started", method))

    def stream_ended(self, method: str) -> None:
        self.seen.append(("ended", method))


def unary(servicer, recorder: RequestObserver | None = None) -> grpc.RpcMethodHandler:
    handler = grpc.unary_unary_rpc_method_handler(
        servicer, request_deserializer=memory_pb2.ListProjectsRequest.FromString
    )
    return ServiceInterceptor(max_concurrent=0, observer=recorder).intercept(handler, Details())


async def answered(request, context):
    return memory_pb2.ListProjectsResponse()


async def test_a_request_that_does_not_decode_is_invalid_argument_in_our_words():
    handler = unary(answered)
    request = handler.request_deserializer(b"\xff\xff\xff")  # not a ListProjectsRequest
    context = InterceptedContext()
    with pytest.raises(Aborted):
        await handler.unary_unary(request, context)
    assert context.code_set == grpc.StatusCode.INVALID_ARGUMENT
    assert context.message.startswith("the request is not a valid ListProjectsRequest: ")
    assert context.message.endswith("(check that client and server use the same .proto)")
    good = handler.request_deserializer(
        memory_pb2.ListProjectsRequest(page_size=3).SerializeToString()
    )
    assert good == memory_pb2.ListProjectsRequest(page_size=3)


async def test_a_domain_error_goes_out_as_its_status_with_credentials_masked():
    async def missing(request, context):
        raise NotFound(
            "project 9 not found at http://u:hunter2@db:5432/x",
            resource_type="project",
            resource_name=9,
        )

    context = InterceptedContext()
    with pytest.raises(Aborted):
        await unary(missing).unary_unary(memory_pb2.ListProjectsRequest(), context)
    assert context.code_set == grpc.StatusCode.NOT_FOUND
    assert context.message.startswith("project 9 not found at http://***@db:5432/x")


async def test_an_unexpected_error_is_internal_with_the_request_id_and_not_its_text(caplog):
    async def broken(request, context):
        raise RuntimeError("secret internals")

    recorder = Recorder()
    context = InterceptedContext()
    with caplog.at_level(logging.ERROR, logger="nexus_grpc.access"), pytest.raises(Aborted):
        await unary(broken, recorder).unary_unary(memory_pb2.ListProjectsRequest(), context)
    [(_, rid)] = [t for t in context.trailers if t[0] == "x-request-id"]
    assert context.code_set == grpc.StatusCode.INTERNAL
    assert context.message == f"internal error (request id {rid}); see the server log"
    assert "secret internals" not in context.message
    assert any(r.exc_info and "secret internals" in str(r.exc_info[1]) for r in caplog.records)
    assert recorder.seen == [("observed", grpc.StatusCode.INTERNAL)]


async def test_a_server_stream_is_counted_open_until_it_ends():
    async def two(request, context):
        for i in range(2):
            yield memory_pb2.Project(id=i + 1)

    recorder = Recorder()
    handler = ServiceInterceptor(max_concurrent=0, observer=recorder).intercept(
        grpc.unary_stream_rpc_method_handler(two), Details()
    )
    sent = [
        m.id
        async for m in handler.unary_stream(memory_pb2.ListProjectsRequest(), InterceptedContext())
    ]
    assert sent == [1, 2]
    assert recorder.seen == [
        ("started", METHOD),
        ("ended", METHOD),
        ("observed", grpc.StatusCode.OK),
    ]


def test_a_bidi_stream_is_left_to_its_own_handler():
    async def reflect(requests, context):
        yield memory_pb2.Project()

    handler = grpc.stream_stream_rpc_method_handler(reflect)
    details = Details("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
    assert ServiceInterceptor(max_concurrent=1).intercept(handler, details) is handler
