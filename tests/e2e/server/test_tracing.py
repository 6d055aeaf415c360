"""Optional OpenTelemetry traces from a whole server, recorded by the SDK's
in-memory exporter: the interceptor opens and closes each RPC's span from a
real client's call (its request id, the trace the client sent, its code), and
the App's proxies nest the database's, the index's, the embedder's and the
LLM's spans under it; off by default, the App's components are the real objects.

The tracing module's own rules (a span's name, kind and attributes, an error
span for a failed call but not a cancelled one, child spans only inside an RPC,
nothing propagated or wrapped when off, refused settings) are unit tests, in
tests/unit/test_tracing_rules.py."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the [otel] extra is not installed")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from nexus_grpc.app import App  # noqa: E402
from nexus_grpc.client import NexusClient, NexusClientError  # noqa: E402
from nexus_grpc.embedding import QueryVectorCache  # noqa: E402
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2  # noqa: E402
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2  # noqa: E402
from nexus_grpc.runtime import tracing  # noqa: E402
from nexus_grpc.runtime.config import Settings  # noqa: E402
from nexus_grpc.store import Database  # noqa: E402
from tests.ollama_stub import Reply  # noqa: E402
from tests.support import HashingEmbedder, start_harness  # noqa: E402

SESSION_PROMPT = "You summarise a conversation"


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    tracing.configure(exporter=exporter)
    yield exporter
    tracing.shutdown()


def by_name(exporter, name):
    return [span for span in exporter.get_finished_spans() if span.name == name]


def children(exporter, parent):
    return [
        span
        for span in exporter.get_finished_spans()
        if span.parent is not None and span.parent.span_id == parent.context.span_id
    ]


async def test_each_rpc_is_a_span_with_child_spans_under_the_callers_trace(tmp_path, spans, stub):
    client_tracer = TracerProvider()
    client_spans = InMemorySpanExporter()
    client_tracer.add_span_processor(SimpleSpanProcessor(client_spans))
    h = await start_harness(tmp_path / "data", ollama_url=stub.url)
    try:
        async with NexusClient(h.target) as client:
            with client_tracer.get_tracer("test").start_as_current_span("orchestrator"):
                session = await client.create_session(session=memory_pb2.Session(name="traced"))
                await client.create_episode(
                    session_id=session.id,
                    user_message="apples are red",
                    call_metadata=[("x-request-id", "trace-req-1")],
                )
                # Embeds the query and searches the index, whatever it finds.
                await client.search_episodes(
                    query="apples", session_id=session.id, mode=memory_pb2.SEARCH_MODE_SEMANTIC
                ).collect()
                stub.add_rule(Reply.of("Fruit talk."), contains=SESSION_PROMPT, times=1)
                await h.summary.SummarizeSession(
                    summary_pb2.SummarizeSessionRequest(session_id=session.id)
                )
                with pytest.raises(NexusClientError):
                    await client.get_session(id=424242)
    finally:
        await h.close()

    (caller,) = client_spans.get_finished_spans()
    create = by_name(spans, "nexus.memory.v1.MemoryService/CreateEpisode")
    assert len(create) == 1, "one span per RPC"
    (create,) = create
    assert create.attributes["nexus.request_id"] == "trace-req-1"
    assert create.attributes["rpc.grpc.status_code"] == 0
    # The client's context travelled in the metadata: same trace, caller as parent.
    assert create.context.trace_id == caller.context.trace_id
    assert create.parent.span_id == caller.context.span_id
    assert "db.write" in {c.name for c in children(spans, create)}

    (search,) = by_name(spans, "nexus.memory.v1.MemoryService/SearchEpisodes")
    names = {c.name for c in children(spans, search)}
    assert {"embedder.embed_query", "vector.search"} <= names, names

    (summarize,) = by_name(spans, "nexus.summary.v1.SummaryService/SummarizeSession")
    llm = [c for c in children(spans, summarize) if c.name.startswith("llm.")]
    assert llm, {c.name for c in children(spans, summarize)}

    (missing,) = by_name(spans, "nexus.memory.v1.MemoryService/GetSession")
    assert missing.attributes["rpc.grpc.status_code"] == 5  # NOT_FOUND


async def test_off_by_default_nothing_is_wrapped(tmp_path):
    assert not tracing.enabled()
    app = App(Settings(data_dir=tmp_path / "data"), embedder=HashingEmbedder())
    # The components are the real objects, not proxies: tracing costs nothing when off.
    assert type(app.db) is Database
    # (The query-vector cache is a component of its own, not a tracing proxy.)
    assert type(app.embedder) is QueryVectorCache
    assert type(app.embedder.inner) is HashingEmbedder
