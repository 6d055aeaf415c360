"""How everything that calls a nexus-grpc server opens its channel.

The typed client, ``nexus-grpc bench``, ``nexus-grpc doctor`` and the tests all
go through :func:`open_channel`, so plaintext vs TLS/mTLS, the bearer API key
and the retry policy are decided in one place.

Retries are gRPC's own (gRFC A6), set through the channel's service config:
the channel resends a call that failed with a retryable status, with
exponential backoff, and honours the server's ``grpc-retry-pushback-ms``.  Only
calls that are safe to repeat are named in it (:func:`retryable_methods`).

The service config also turns on client-side health checking (gRFC A17): each
connection watches ``grpc.health.v1`` for the whole server, and a channel
balancing round robin (``("grpc.lb_policy_name", "round_robin")``, see
docs/scale-out.md) sends nothing to an instance that says NOT_SERVING, as one
whose database is down does, until it says SERVING again. pick_first, the
default, ignores health (A17), so a single-address client is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
from google.protobuf.descriptor import ServiceDescriptor

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2

__all__ = [
    "DEFAULT_RETRY",
    "REQUEST_ID_FIELD",
    "SERVICES",
    "RetryPolicy",
    "bearer_metadata",
    "open_channel",
    "retryable_methods",
    "service_config",
]

#: The three nexus services, by short name.
SERVICES: dict[str, ServiceDescriptor] = {
    "MemoryService": memory_pb2.DESCRIPTOR.services_by_name["MemoryService"],
    "GraphService": graph_pb2.DESCRIPTOR.services_by_name["GraphService"],
    "SummaryService": summary_pb2.DESCRIPTOR.services_by_name["SummaryService"],
}

#: A create whose request has this field is deduplicated by the server.
REQUEST_ID_FIELD = "request_id"

# Reads change nothing, so repeating one is harmless.
_READ_PREFIXES = ("Get", "List", "Search", "Select", "Watch", "Export")
_HEALTH = "grpc.health.v1.Health"


@dataclass(frozen=True)
class RetryPolicy:
    """A gRPC ``retryPolicy``.  grpc caps ``max_attempts`` (the first included) at 5."""

    max_attempts: int = 5
    initial_backoff: float = 0.1
    max_backoff: float = 5.0
    backoff_multiplier: float = 2.0
    # UNAVAILABLE: no server answered (down, restarting, draining).
    # RESOURCE_EXHAUSTED: our server sends it only at its concurrency limits
    # (--max-concurrent-rpcs, --max-watch-streams), saying to retry with
    # backoff.  A request too big for the server is RESOURCE_EXHAUSTED too, but
    # it is larger than grpc's retry buffer, so grpc never replays it.
    codes: tuple[str, ...] = field(default=("UNAVAILABLE", "RESOURCE_EXHAUSTED"))


DEFAULT_RETRY = RetryPolicy()


def retryable_methods(
    services: Iterable[ServiceDescriptor] = SERVICES.values(),
) -> list[tuple[str, str]]:
    """``(service full name, method)`` for every call that is safe to repeat.

    Reads, and creates whose request carries a ``request_id`` (the server
    returns the first result for a repeated id; the client fills one in when
    the caller does not).  Updates, deletes, upserts and LLM-backed summaries
    are left out: a repeat could apply twice or answer differently.
    """
    out = [(_HEALTH, "Check")]
    for service in services:
        for method in service.methods:
            read = method.name.startswith(_READ_PREFIXES)
            deduplicated = REQUEST_ID_FIELD in method.input_type.fields_by_name
            if read or deduplicated:
                out.append((service.full_name, method.name))
    return out


def _duration(seconds: float) -> str:
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


#: The health a client checks: the whole server's ("" in grpc.health.v1), which
#: the server turns NOT_SERVING when its system of record does not answer.
HEALTH_SERVICE_NAME = ""


def service_config(policy: RetryPolicy | None = DEFAULT_RETRY) -> str:
    """The service config JSON: client-side health checking, and (``policy``
    not None) retries of the safe methods."""
    config: dict[str, Any] = {"healthCheckConfig": {"serviceName": HEALTH_SERVICE_NAME}}
    if policy is not None:
        config["methodConfig"] = [
            {
                "name": [{"service": s, "method": m} for s, m in retryable_methods()],
                "retryPolicy": {
                    "maxAttempts": policy.max_attempts,
                    "initialBackoff": _duration(policy.initial_backoff),
                    "maxBackoff": _duration(policy.max_backoff),
                    "backoffMultiplier": policy.backoff_multiplier,
                    "retryableStatusCodes": list(policy.codes),
                },
            }
        ]
    return json.dumps(config)


def bearer_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    """The call metadata that carries ``api_key`` (empty without one)."""
    return (("authorization", f"Bearer {api_key}"),) if api_key else ()


def open_channel(
    target: str,
    *,
    root_certificates: bytes | None = None,
    private_key: bytes | None = None,
    certificate_chain: bytes | None = None,
    retry: RetryPolicy | None = DEFAULT_RETRY,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.aio.Channel:
    """A ``grpc.aio`` channel to ``target``.

    TLS when any of the certificate arguments is given (``root_certificates``
    None: the system roots; ``private_key`` and ``certificate_chain``: a
    client certificate for mTLS), else plaintext.  ``retry`` None sets no
    retry policy: every call is tried once. A ``grpc.service_config`` in
    ``options`` replaces the one made here.
    """
    opts = list(options)
    if not any(key == "grpc.service_config" for key, _ in opts):
        opts.append(("grpc.service_config", service_config(retry)))
    if any(x is not None for x in (root_certificates, private_key, certificate_chain)):
        credentials = grpc.ssl_channel_credentials(
            root_certificates=root_certificates,
            private_key=private_key,
            certificate_chain=certificate_chain,
        )
        return grpc.aio.secure_channel(target, credentials, options=opts)
    return grpc.aio.insecure_channel(target, options=opts)
