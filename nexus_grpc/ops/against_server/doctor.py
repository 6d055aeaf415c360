"""``nexus-grpc doctor``: a running server's health detail, readable.

Calls ``grpc.health.v1.Health/Check`` and ``MemoryService/GetServiceStatus`` and
prints the state, schema version, embedding model, each dependency and each
background queue.  Each dependency is ``ok``, ``off`` (optional and not
configured, as an LLM server or a reranker is after ``make run``: nothing is
failing, and the line says what waits for it) or ``FAIL`` (configured and
failing).  Exit status: 0 SERVING (dependencies that are off included), 1
DEGRADED (or not serving), 2 when the server cannot be reached.

``doctor --health`` is the container's HEALTHCHECK: one ``Health/Check`` of the
server that ``serve`` would start from the same environment (``NEXUS_LISTEN``,
``NEXUS_TLS_CERT``/``NEXUS_TLS_KEY``, ``NEXUS_TLS_CLIENT_CA``), one line of
output, exit 0 only on SERVING and 1 otherwise.
"""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import grpc

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.runtime.config import env_default

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

    _report(status, say)
    if health == "SERVING" and status.state == "SERVING":
        return EXIT_SERVING
    return EXIT_DEGRADED


def _report(status: memory_pb2.ServiceStatus, say: Callable[[str], None]) -> None:
    """GetServiceStatus's answer, a line or a table per part."""
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
            mark = "FAIL" if not dep.ok else "off " if dep.off else "ok  "
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
    budgets = [b for b in status.budgets if b.llm_tokens_per_day or b.llm_tokens_today]
    if budgets:
        say("  LLM tokens today (docs/usage.md)")
        width = max(len(b.tenant) for b in budgets)
        for b in budgets:
            limit = f" of {b.llm_tokens_per_day:,}" if b.llm_tokens_per_day else " (no budget)"
            spent = "  SPENT: its LLM work waits for 00:00 UTC" if b.exhausted else ""
            say(f"    {b.tenant:<{width}}  {b.llm_tokens_today:,}{limit}{spent}")
            share = b.llm_tokens_per_day_per_user
            for u in b.users:
                of = f" of {share:,} a user" if share else ""
                waits = "  SPENT: their LLM work waits for 00:00 UTC" if u.exhausted else ""
                say(f"    {'':<{width}}  user {u.user_id!r}: {u.llm_tokens_today:,}{of}{waits}")


# --- doctor --health: the image's HEALTHCHECK -------------------------------------------

#: A client certificate for the health check when the server requires one (mTLS).
#: Unset, the check presents the server's own certificate and key, which a client
#: CA accepts only when it signed them for client use too.
HEALTH_CLIENT_CERT_ENV = "NEXUS_HEALTH_CLIENT_CERT"
HEALTH_CLIENT_KEY_ENV = "NEXUS_HEALTH_CLIENT_KEY"

#: Docker reads a HEALTHCHECK's exit status 1 as unhealthy and reserves 2, so the
#: health check never uses ``EXIT_UNREACHABLE``.
EXIT_UNHEALTHY = 1

_WILDCARD_HOSTS = ("", "0.0.0.0", "*")
_WILDCARD_HOSTS_V6 = ("::", "[::]")


class HealthConfigError(ValueError):
    """The environment names a server the health check cannot dial."""


@dataclass(frozen=True)
class HealthProbe:
    """How ``doctor --health`` reaches the server that ``serve`` starts from the
    same settings."""

    target: str
    tls: bool = False
    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    #: The name checked against the server certificate (it is dialled on loopback,
    #: which the certificate need not name).
    server_name: str | None = None
    #: Whether the client certificate is the server's own (no NEXUS_HEALTH_CLIENT_*).
    own_client_certificate: bool = False

    def describe(self) -> str:
        if not self.tls:
            return f"{self.target} (plaintext)"
        mode = "mTLS" if self.certificate_chain else "TLS"
        return f"{self.target} ({mode})"


def local_target(listen: str) -> str:
    """The address a process beside the server dials to reach ``listen``: a
    wildcard host (all interfaces) becomes loopback; a port of 0 (any free one)
    cannot be known from outside and is refused."""
    if listen.startswith("unix:"):
        return listen
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise HealthConfigError(f"NEXUS_LISTEN {listen!r} is not HOST:PORT")
    if int(port) == 0:
        raise HealthConfigError(
            "NEXUS_LISTEN has port 0 (any free port): a health check cannot know which one"
        )
    if host in _WILDCARD_HOSTS:
        host = "127.0.0.1"
    elif host in _WILDCARD_HOSTS_V6:
        host = "[::1]"
    return f"{host}:{port}"


def certificate_names(pem_path: str) -> list[str]:
    """The names a certificate is valid for: its DNS and IP subject alternative
    names, or its common name when it has none. Empty when the file cannot be
    decoded.

    The standard library decodes certificates only through this private helper
    (the public ``getpeercert`` needs a live connection, and the ``cryptography``
    package is not a dependency); it has been there since Python 2.7."""
    try:
        decoded = ssl._ssl._test_decode_cert(pem_path)  # type: ignore[attr-defined]
    except (AttributeError, OSError, ssl.SSLError, ValueError):
        return []
    alt = decoded.get("subjectAltName", ())
    names = [value for kind, value in alt if kind == "DNS"]
    names += [value for kind, value in alt if kind == "IP Address"]
    if names:
        return names
    # Verification reads the common name only when there is no alternative name.
    return [
        value for rdn in decoded.get("subject", ()) for key, value in rdn if key == "commonName"
    ]


def _checkable_name(names: list[str]) -> str | None:
    """A name from ``names`` that hostname verification accepts: a plain one
    first; a wildcard with its star filled in otherwise."""
    for name in names:
        if "*" not in name:
            return name
    for name in names:
        if name.startswith("*."):
            return "health" + name[1:]
    return None


def _read(what: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise HealthConfigError(f"{what}: cannot read {path}: {exc}") from exc


def probe_from_environment(env: Mapping[str, str] | None = None) -> HealthProbe:
    """The probe for the server ``serve`` starts from ``env`` (default: this
    process's environment).

    With TLS, the server's own certificate is the only trust root (a health
    check beside the server pins it, whoever issued it), checked against a name
    it carries. With a client CA (mTLS), the check presents
    ``NEXUS_HEALTH_CLIENT_CERT``/``NEXUS_HEALTH_CLIENT_KEY`` or, unset, the
    server's own certificate and key.
    """
    env = os.environ if env is None else env
    target = local_target(env_default("listen", env))
    cert, key = env_default("tls_cert", env), env_default("tls_key", env)
    if not cert and not key:
        return HealthProbe(target)
    if not (cert and key):
        raise HealthConfigError("NEXUS_TLS_CERT and NEXUS_TLS_KEY go together")
    roots = _read("NEXUS_TLS_CERT", cert)
    server_name = _checkable_name(certificate_names(cert))
    if not env_default("tls_client_ca", env):
        return HealthProbe(target, tls=True, root_certificates=roots, server_name=server_name)
    client_cert = env.get(HEALTH_CLIENT_CERT_ENV, "")
    client_key = env.get(HEALTH_CLIENT_KEY_ENV, "")
    if bool(client_cert) != bool(client_key):
        raise HealthConfigError(f"{HEALTH_CLIENT_CERT_ENV} and {HEALTH_CLIENT_KEY_ENV} go together")
    own = not client_cert
    chain = _read("NEXUS_TLS_CERT", cert) if own else _read(HEALTH_CLIENT_CERT_ENV, client_cert)
    private = _read("NEXUS_TLS_KEY", key) if own else _read(HEALTH_CLIENT_KEY_ENV, client_key)
    return HealthProbe(
        target,
        tls=True,
        root_certificates=roots,
        certificate_chain=chain,
        private_key=private,
        server_name=server_name,
        own_client_certificate=own,
    )


async def health_check(
    probe: HealthProbe,
    timeout: float,  # noqa: ASYNC109 - a gRPC deadline, not an asyncio timeout
    *,
    out: TextIO | None = None,
) -> int:
    """One ``grpc.health.v1.Health/Check`` of the whole server through ``probe``;
    prints one line (Docker keeps it in the container's health log) and returns
    ``EXIT_SERVING`` only when the answer is SERVING, else ``EXIT_UNHEALTHY``."""
    out = out or sys.stdout
    options = []
    if probe.server_name:
        options.append(("grpc.ssl_target_name_override", probe.server_name))
    # One try, no waiting for a connection: a refused or failed handshake is
    # reported at once with its reason, within Docker's --timeout.
    async with NexusClient(
        probe.target,
        root_certificates=probe.root_certificates,
        certificate_chain=probe.certificate_chain,
        private_key=probe.private_key,
        timeout=timeout,
        retry=None,
        options=options,
    ) as client:
        try:
            status = await client.check_health()
        except NexusClientError as exc:
            hint = ""
            if probe.own_client_certificate and exc.code == grpc.StatusCode.UNAVAILABLE:
                hint = (
                    f" (mTLS: the check presented the server's own certificate; set"
                    f" {HEALTH_CLIENT_CERT_ENV} and {HEALTH_CLIENT_KEY_ENV} to a client"
                    f" certificate NEXUS_TLS_CLIENT_CA signed)"
                )
            print(f"unhealthy: {probe.describe()}: {exc}{hint}", file=out)
            return EXIT_UNHEALTHY
    print(f"{status}: {probe.describe()}", file=out)
    return EXIT_SERVING if status == "SERVING" else EXIT_UNHEALTHY
