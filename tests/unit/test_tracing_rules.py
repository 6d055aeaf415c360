"""The tracing module's rules (runtime/tracing.py), called directly and recorded by
the SDK's in-memory exporter: an RPC's span continues the trace its caller sent
in the metadata, carries the method, request id and status code, and is an error
for a failed call but not a cancelled one; the proxies put a child span around a
part's coroutines and async generators inside an RPC and none outside one; off
(the default, or after ``shutdown``) nothing is wrapped and nothing propagated;
a credential in the OTLP URL and a missing SDK are refused in words. No server,
no collector.

What stays whole-server, in tests/e2e/server/test_tracing.py: the service
interceptor opening and closing each RPC's span from a real client's call
(its request id, its trace, its code), and the App wrapping the database, the
index, the embedder and the LLM so their spans nest under the RPC's; off by
default, the App's components are the real objects."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest

pytest.importorskip("opentelemetry.sdk", reason="the [otel] extra is not installed")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from nexus_grpc.runtime import tracing  # noqa: E402

METHOD = "/nexus.memory.v1.MemoryService/CreateEpisode"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.configure(exporter=exporter)
    yield exporter
    tracing.shutdown()


def callers_metadata() -> tuple[list[tuple[str, str]], object]:
    """The metadata a traced client sends from inside its own span, and that span."""
    provider = TracerProvider()
    recorded = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(recorded))
    metadata: list[tuple[str, str]] = [("x-request-id", "req-1")]
    with provider.get_tracer("client").start_as_current_span("orchestrator"):
        tracing.inject(metadata)
    (caller,) = recorded.get_finished_spans()
    return metadata, caller


# An RPC's span -------------------------------------------------------------------------


def test_an_rpcs_span_continues_the_trace_its_caller_sent(spans):
    metadata, caller = callers_metadata()
    assert "traceparent" in dict(metadata)
    rpc = tracing.start_rpc(METHOD, "req-1", dict(metadata))
    tracing.end_rpc(rpc, grpc.StatusCode.OK)
    (span,) = spans.get_finished_spans()
    assert span.context.trace_id == caller.context.trace_id
    assert span.parent is not None and span.parent.span_id == caller.context.span_id


def test_an_rpcs_span_is_named_for_its_method_and_carries_the_request_id(spans):
    rpc = tracing.start_rpc(METHOD, "req-7", {"x-request-id": "req-7"})
    tracing.end_rpc(rpc, grpc.StatusCode.OK)
    (span,) = spans.get_finished_spans()
    assert span.name == "nexus.memory.v1.MemoryService/CreateEpisode"
    assert span.kind == SpanKind.SERVER
    assert span.parent is None  # no caller's context: a trace of its own
    assert dict(span.attributes) == {
        "rpc.system": "grpc",
        "rpc.service": "nexus.memory.v1.MemoryService",
        "rpc.method": "CreateEpisode",
        "nexus.request_id": "req-7",
        "rpc.grpc.status_code": 0,
    }
    assert span.status.status_code == StatusCode.UNSET


def test_a_trace_context_that_is_not_text_is_ignored(spans):
    metadata, caller = callers_metadata()
    binary = {"traceparent": dict(metadata)["traceparent"].encode(), "x-request-id": "req-1"}
    rpc = tracing.start_rpc(METHOD, "req-1", binary)
    tracing.end_rpc(rpc, grpc.StatusCode.OK)
    (span,) = spans.get_finished_spans()
    assert span.parent is None
    assert span.context.trace_id != caller.context.trace_id


@pytest.mark.parametrize(
    ("code", "number"),
    [(grpc.StatusCode.NOT_FOUND, 5), (grpc.StatusCode.INTERNAL, 13)],
)
def test_a_failed_rpc_is_an_error_span_with_its_code(spans, code, number):
    tracing.end_rpc(tracing.start_rpc(METHOD, "r", {}), code)
    (span,) = spans.get_finished_spans()
    assert span.attributes["rpc.grpc.status_code"] == number
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == code.name


def test_a_cancelled_rpc_is_not_an_error(spans):
    tracing.end_rpc(tracing.start_rpc(METHOD, "r", {}), grpc.StatusCode.CANCELLED)
    (span,) = spans.get_finished_spans()
    assert span.attributes["rpc.grpc.status_code"] == 1
    assert span.status.status_code == StatusCode.UNSET


# The parts' child spans ----------------------------------------------------------------


class Part:
    """A component as App hands it to the proxy: coroutines, an async generator,
    a plain method and attributes."""

    def __init__(self) -> None:
        self.calls = 0
        self._secret = "inner"

    async def write(self, value: int) -> int:
        self.calls += 1
        return value * 2

    async def scroll(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    def name(self) -> str:
        return "part"


async def test_a_parts_coroutines_and_generators_are_child_spans_inside_an_rpc(spans):
    part = tracing.traced(Part(), "db")
    rpc = tracing.start_rpc(METHOD, "r", {})
    assert await part.write(4) == 8
    assert [i async for i in part.scroll(3)] == [0, 1, 2]
    tracing.end_rpc(rpc, grpc.StatusCode.OK)
    by_name = {span.name: span for span in spans.get_finished_spans()}
    assert set(by_name) == {"db.write", "db.scroll", METHOD.lstrip("/")}
    server = by_name[METHOD.lstrip("/")]
    for child in ("db.write", "db.scroll"):
        assert by_name[child].parent is not None
        assert by_name[child].parent.span_id == server.context.span_id


async def test_outside_an_rpc_the_parts_calls_make_no_span(spans):
    part = tracing.traced(Part(), "db")
    assert await part.write(1) == 2  # a background job: no trace of its own
    assert [i async for i in part.scroll(2)] == [0, 1]
    assert spans.get_finished_spans() == ()


def test_the_proxy_passes_plain_attributes_through_both_ways(spans):
    inner = Part()
    part = tracing.traced(inner, "db")
    assert part.name() == "part"
    assert part._secret == "inner"
    part.calls = 9
    assert inner.calls == 9
    assert tracing.traced(None, "db") is None


# Off -----------------------------------------------------------------------------------


def test_off_nothing_is_wrapped_and_nothing_propagated():
    assert not tracing.enabled()
    part = Part()
    assert tracing.traced(part, "db") is part
    metadata: list[tuple[str, str]] = []
    tracing.inject(metadata)  # no active span: nothing to propagate
    assert metadata == []


def test_shutdown_turns_tracing_off():
    tracing.configure(exporter=InMemorySpanExporter())
    assert tracing.enabled()
    part = Part()
    assert tracing.traced(part, "db") is not part
    tracing.shutdown()
    assert not tracing.enabled()
    assert tracing.traced(part, "db") is part
    tracing.shutdown()  # twice is harmless


# Refused settings ----------------------------------------------------------------------


def test_a_credential_in_the_otlp_url_is_refused_masked():
    with pytest.raises(ValueError) as refused:
        tracing.configure("http://collector:hunter2@otel.lan:4317")
    message = str(refused.value)
    assert "hunter2" not in message
    assert "OTEL_EXPORTER_OTLP_HEADERS" in message
    assert not tracing.enabled()


def test_without_the_sdk_the_setting_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)
    with pytest.raises(ValueError, match=r"needs OpenTelemetry .*nexus-grpc\[otel\]"):
        tracing.configure(exporter=InMemorySpanExporter())
    assert not tracing.enabled()
