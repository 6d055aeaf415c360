"""Optional OpenTelemetry traces: one span per RPC, child spans for its work.

Off by default.  ``--otel-endpoint`` (env ``OTEL_EXPORTER_OTLP_ENDPOINT``) turns
it on and sends spans over OTLP/gRPC; the packages come with
``pip install 'nexus-grpc[otel]'``.  When off, nothing of OpenTelemetry is
imported, no component is wrapped, and the interceptor's only cost is one
``enabled()`` test per RPC.

When on:

- every RPC gets a server span named after its method, with the request id
  (``nexus.request_id``) and the status code, continuing the trace the client
  sent in its metadata (W3C ``traceparent``);
- the database (``db.read``/``db.write``), the vector index (``vector.*``), the
  embedder (``embedder.embed``, ``embedder.embed_query``) and each LLM call
  (``llm.*``) get child spans, through proxies the composition root (``App``)
  puts around them.  Work done outside any RPC (background jobs) starts no
  trace of its own.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeVar

import grpc

from nexus_grpc.core.redact import mask_url, url_secrets

__all__ = [
    "configure",
    "enabled",
    "inject",
    "end_rpc",
    "start_rpc",
    "shutdown",
    "traced",
]

T = TypeVar("T")

_tracer: Any = None
_provider: Any = None


def enabled() -> bool:
    return _tracer is not None


def configure(endpoint: str = "", *, exporter: Any = None) -> None:
    """Turns tracing on: spans go to the OTLP/gRPC ``endpoint``, or to ``exporter``
    (synchronously, for tests: e.g. the SDK's ``InMemorySpanExporter``)."""
    global _tracer, _provider
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ModuleNotFoundError as exc:
        raise ValueError(
            f"--otel-endpoint needs OpenTelemetry ({exc.name} is missing):"
            " pip install 'nexus-grpc[otel]'"
        ) from None
    # A provider of our own, not the process-wide one: a host application's
    # tracing setup stays as it was.
    provider = TracerProvider(resource=Resource.create({"service.name": "nexus-grpc"}))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        if url_secrets(endpoint):
            # OTLP/gRPC sends no credential from the URL (it would dial
            # "user:password@host" as a host name, and gRPC's own log would
            # print it): headers carry them.
            raise ValueError(
                f"--otel-endpoint {mask_url(endpoint)}: OTLP does not send a credential"
                " written in the URL; give it with OTEL_EXPORTER_OTLP_HEADERS"
                " (e.g. authorization=Bearer%20TOKEN) and leave it out of the URL"
            )

        # A short export deadline: an unreachable collector costs a shutdown
        # seconds, not the exporter's default retries; spans are dropped, never
        # the RPCs that made them.
        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=3)
        provider.add_span_processor(BatchSpanProcessor(exporter))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _provider = provider
    _tracer = provider.get_tracer("nexus_grpc")


def shutdown() -> None:
    """Flushes the spans still queued and turns tracing off."""
    global _tracer, _provider
    provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


class RpcSpan:
    """The server span of one RPC and the context it is current in."""

    def __init__(self, span: Any, token: Any) -> None:
        self.span = span
        self.token = token


def start_rpc(method: str, request_id: str, metadata: Mapping[str, Any]) -> RpcSpan:
    """Starts the RPC's span, a child of the caller's span when it sent one, and makes
    it current, so the work the handler does nests under it."""
    from opentelemetry import context, propagate, trace

    service, _, name = method.lstrip("/").partition("/")
    parent = propagate.extract({k: v for k, v in metadata.items() if isinstance(v, str)})
    span = _tracer.start_span(
        method.lstrip("/"),
        context=parent,
        kind=trace.SpanKind.SERVER,
        attributes={
            "rpc.system": "grpc",
            "rpc.service": service,
            "rpc.method": name,
            "nexus.request_id": request_id,
        },
    )
    return RpcSpan(span, context.attach(trace.set_span_in_context(span, parent)))


def end_rpc(rpc: RpcSpan, code: grpc.StatusCode) -> None:
    from opentelemetry import context
    from opentelemetry.trace import Status, StatusCode

    rpc.span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code not in (grpc.StatusCode.OK, grpc.StatusCode.CANCELLED):
        rpc.span.set_status(Status(StatusCode.ERROR, code.name))
    rpc.span.end()
    with contextlib.suppress(ValueError):  # a stream closed from another context
        context.detach(rpc.token)


@functools.cache
def _propagation() -> tuple[Any, Any] | None:
    """OpenTelemetry's propagate and trace modules, or None where it is not installed
    (looked up once: a light client install has no OpenTelemetry)."""
    try:
        from opentelemetry import propagate, trace
    except ModuleNotFoundError:
        return None
    return propagate, trace


def inject(metadata: list[tuple[str, str]]) -> None:
    """Adds the current trace context (``traceparent``) to a client's call metadata,
    when OpenTelemetry is installed and the caller is inside a span."""
    modules = _propagation()
    if modules is None:
        return
    propagate, trace = modules
    if not trace.get_current_span().get_span_context().is_valid:
        return
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    metadata.extend(carrier.items())


def _in_rpc() -> bool:
    from opentelemetry import trace

    return bool(trace.get_current_span().get_span_context().is_valid)


class _Traced:
    """Passes every attribute through; coroutine and async-generator methods run
    inside a span named ``{kind}.{method}`` when they are called within a trace."""

    def __init__(self, target: Any, kind: str) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_kind", kind)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name.startswith("_"):
            return value
        if inspect.iscoroutinefunction(value):
            return _traced_coroutine(value, f"{self._kind}.{name}")
        if inspect.isasyncgenfunction(value):
            return _traced_generator(value, f"{self._kind}.{name}")
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)


def _traced_coroutine(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        if _tracer is None or not _in_rpc():
            return await fn(*args, **kwargs)
        with _tracer.start_as_current_span(name):
            return await fn(*args, **kwargs)

    return call


def _traced_generator(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        if _tracer is None or not _in_rpc():
            async for item in fn(*args, **kwargs):
                yield item
            return
        # Not made current: a generator may be resumed from another context,
        # where detaching it would fail.
        span = _tracer.start_span(name)
        try:
            async for item in fn(*args, **kwargs):
                yield item
        finally:
            span.end()

    return call


def traced(target: T, kind: str) -> T:
    """``target`` with child spans, when tracing is on; else ``target`` itself."""
    if target is None or _tracer is None:
        return target
    return _Traced(target, kind)  # type: ignore[return-value]
