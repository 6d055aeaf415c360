"""``nexus-grpc doctor``: a running server's health detail, readable.

Calls ``grpc.health.v1.Health/Check`` and ``MemoryService/GetServiceStatus`` and
prints the state, schema version, embedding model, each dependency and each
background queue.  Exit status: 0 SERVING, 1 DEGRADED (or not serving), 2 when
the server cannot be reached.
"""

from __future__ import annotations

import sys
from typing import TextIO

import grpc

from nexus_grpc.client import NexusClient, NexusClientError

EXIT_SERVING = 0
EXIT_DEGRADED = 1
EXIT_UNREACHABLE = 2

# Codes that mean "no answer from a server", not "the server answered with an error".
_UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def _age(seconds: float) -> str:
    if seconds <= 0:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


async def doctor(
    target: str,
    timeout: float,  # noqa: ASYNC109 - a gRPC deadline, not an asyncio timeout
    *,
    api_key: str | None = None,
    root_certificates: bytes | None = None,
    private_key: bytes | None = None,
    certificate_chain: bytes | None = None,
    out: TextIO | None = None,
) -> int:
    """Prints ``target``'s health report to ``out`` (stdout); returns the exit status.

    With auth on, the health check still answers without a key, but the
    service status needs one (any valid key). TLS roots (and a client
    certificate, for mTLS) reach a server started with ``--tls-cert``.
    """
    out = out or sys.stdout

    def say(line: str = "") -> None:
        print(line, file=out)

    say(f"nexus-grpc doctor: {target}")
    async with NexusClient(
        target,
        api_key=api_key,
        root_certificates=root_certificates,
        private_key=private_key,
        certificate_chain=certificate_chain,
        timeout=timeout,
    ) as client:
        try:
            await client.wait_ready(timeout)
        except TimeoutError:
            say(f"  unreachable: no connection within {timeout:g}s")
            return EXIT_UNREACHABLE

        try:
            health = await client.check_health()
        except NexusClientError as exc:
            if exc.code in _UNREACHABLE:
                say(f"  unreachable: {exc}")
                return EXIT_UNREACHABLE
            health = f"error ({exc})"
        say(f"  health check      {health}")

        try:
            status = await client.get_service_status()
        except NexusClientError as exc:
            say(f"  service status    unavailable: {exc}")
            if exc.code in _UNREACHABLE:
                return EXIT_UNREACHABLE
            return EXIT_SERVING if health == "SERVING" else EXIT_DEGRADED

    say(f"  state             {status.state or '?'}")
    say(f"  schema version    {status.schema_version}")
    say(
        f"  embedding         {status.embedding_model or '?'} "
        f"(dimension {status.embedding_dimension})"
    )
    if status.dependencies:
        say("  dependencies")
        width = max(len(d.name) for d in status.dependencies)
        for dep in status.dependencies:
            mark = "ok  " if dep.ok else "FAIL"
            detail = f"  {dep.detail}" if dep.detail else ""
            say(f"    {mark}  {dep.name:<{width}}{detail}")
    if status.HasField("event_loop"):
        loop = status.event_loop
        say(
            f"  event loop        worst delay {loop.max_lag_ms:.0f} ms; "
            f"{loop.over_100ms} of {loop.samples} wake-ups over 100 ms late"
        )
    if status.queues:
        say("  queues")
        width = max(len(q.kind) for q in status.queues)
        say(f"    {'kind':<{width}}  {'pending':>8}  {'failed':>8}  {'oldest':>8}")
        for queue in status.queues:
            say(
                f"    {queue.kind:<{width}}  {queue.pending:>8}  {queue.failed:>8}  "
                f"{_age(queue.oldest_pending_age_seconds):>8}"
            )

    if health == "SERVING" and status.state == "SERVING":
        return EXIT_SERVING
    return EXIT_DEGRADED
