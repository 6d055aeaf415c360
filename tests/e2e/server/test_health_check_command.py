"""``nexus-grpc doctor --health``, the image's HEALTHCHECK, run as Docker runs it:
a separate process whose only input is the server's own environment.

Each test starts a real server (in-process, TLS as configured) and runs the
real command in a subprocess with ``NEXUS_LISTEN`` on all interfaces and a
port other than 50051, as a container would set them.  ``make image-test``
runs the same command inside the built image.

How the listen address becomes one to dial, serve's default address and an
unreadable certificate are pure functions of the environment, tested in
tests/unit/test_server_settings.py; the TLS settings read from the real
certificates made here stay below.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2

from nexus_grpc.ops.against_server.doctor import (
    HealthConfigError,
    certificate_names,
    probe_from_environment,
)
from tests.support import Harness, start_harness
from tests.tls_certificates import issue, make_ca, openssl_or_skip

# --- certificates ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    """Two CAs, as a LAN often has: one signs servers, one signs clients.

    The server certificates name a LAN host only, not 127.0.0.1, where the health
    check dials: a check that verified the dialled address would fail on them.
    """
    openssl_or_skip()
    d = tmp_path_factory.mktemp("certs")
    make_ca("server-ca", d)
    make_ca("client-ca", d)
    issue("server", "server-ca", "nexus.lan",
          "subjectAltName=DNS:nexus.lan\nextendedKeyUsage=serverAuth", d)  # fmt: skip
    issue("wildcard", "server-ca", "lan",
          "subjectAltName=DNS:*.nexus.lan\nextendedKeyUsage=serverAuth", d)  # fmt: skip
    issue("client", "client-ca", "healthcheck", "extendedKeyUsage=clientAuth", d)
    # One CA for both sides, a certificate good for both uses (what step-ca and
    # cfssl's "peer" profile issue): the server's own certificate passes mTLS.
    issue("peer", "client-ca", "nexus.lan",
          "subjectAltName=DNS:nexus.lan\nextendedKeyUsage=serverAuth,clientAuth", d)  # fmt: skip
    return d


# --- the command -------------------------------------------------------------------------


def _port(h: Harness) -> str:
    return h.target.rpartition(":")[2]


async def _health_command(env: dict[str, str]) -> tuple[int, str]:
    """Runs ``nexus-grpc doctor --health`` with only ``env`` as its settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NEXUS_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nexus_grpc.cli", "doctor", "--health", "--timeout", "5",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**clean, **env},
    )  # fmt: skip
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_plaintext_on_another_port_and_all_interfaces_is_healthy(tmp_path):
    h = await start_harness(tmp_path / "data")
    try:
        code, out = await _health_command({"NEXUS_LISTEN": f"0.0.0.0:{_port(h)}"})
        assert (code, out.strip()) == (0, f"SERVING: 127.0.0.1:{_port(h)} (plaintext)")
    finally:
        await h.close()


async def test_a_server_that_is_not_serving_is_unhealthy(tmp_path):
    h = await start_harness(tmp_path / "data")
    try:
        await h.running.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        code, out = await _health_command({"NEXUS_LISTEN": f"0.0.0.0:{_port(h)}"})
        assert code == 1 and out.startswith("NOT_SERVING"), out
    finally:
        await h.close()
    # Gone: 1 as well, never Docker's reserved 2.
    code, out = await _health_command({"NEXUS_LISTEN": f"0.0.0.0:{_port(h)}"})
    assert code == 1 and out.startswith("unhealthy:") and "UNAVAILABLE" in out, out


async def test_tls_is_checked_against_the_servers_own_certificate(tmp_path, certs):
    for name in ("server", "wildcard"):
        h = await start_harness(
            tmp_path / name,
            tls_cert=str(certs / f"{name}.pem"),
            tls_key=str(certs / f"{name}.key"),
        )
        env = {
            "NEXUS_LISTEN": f"[::]:{_port(h)}" if name == "wildcard" else f"0.0.0.0:{_port(h)}",
            "NEXUS_TLS_CERT": str(certs / f"{name}.pem"),
            "NEXUS_TLS_KEY": str(certs / f"{name}.key"),
        }
        try:
            if name == "wildcard":
                # [::] (all interfaces, IPv6) is dialled on [::1], where this server
                # does not listen: the check says so rather than passing.
                code, out = await _health_command(env)
                assert code == 1 and "[::1]" in out, out
                env["NEXUS_LISTEN"] = f"0.0.0.0:{_port(h)}"
            code, out = await _health_command(env)
            assert (code, out.strip()) == (0, f"SERVING: 127.0.0.1:{_port(h)} (TLS)"), out
            # The plaintext check the image used to have reads a TLS server as down.
            code, out = await _health_command({"NEXUS_LISTEN": f"0.0.0.0:{_port(h)}"})
            assert code == 1, out
        finally:
            await h.close()


async def test_mtls_presents_the_configured_client_certificate(tmp_path, certs):
    h = await start_harness(
        tmp_path / "data",
        tls_cert=str(certs / "server.pem"),
        tls_key=str(certs / "server.key"),
        tls_client_ca=str(certs / "client-ca.pem"),
    )
    env = {
        "NEXUS_LISTEN": f"0.0.0.0:{_port(h)}",
        "NEXUS_TLS_CERT": str(certs / "server.pem"),
        "NEXUS_TLS_KEY": str(certs / "server.key"),
        "NEXUS_TLS_CLIENT_CA": str(certs / "client-ca.pem"),
    }
    try:
        # The server's own certificate is not one the client CA signed: refused,
        # and the line says which settings fix it.
        code, out = await _health_command(env)
        assert code == 1 and "NEXUS_HEALTH_CLIENT_CERT" in out, out
        code, out = await _health_command(
            {
                **env,
                "NEXUS_HEALTH_CLIENT_CERT": str(certs / "client.pem"),
                "NEXUS_HEALTH_CLIENT_KEY": str(certs / "client.key"),
            }
        )
        assert (code, out.strip()) == (0, f"SERVING: 127.0.0.1:{_port(h)} (mTLS)"), out
    finally:
        await h.close()


async def test_mtls_with_one_ca_needs_no_extra_settings(tmp_path, certs):
    h = await start_harness(
        tmp_path / "data",
        tls_cert=str(certs / "peer.pem"),
        tls_key=str(certs / "peer.key"),
        tls_client_ca=str(certs / "client-ca.pem"),
    )
    try:
        code, out = await _health_command(
            {
                "NEXUS_LISTEN": f"0.0.0.0:{_port(h)}",
                "NEXUS_TLS_CERT": str(certs / "peer.pem"),
                "NEXUS_TLS_KEY": str(certs / "peer.key"),
                "NEXUS_TLS_CLIENT_CA": str(certs / "client-ca.pem"),
            }
        )
        assert (code, out.strip()) == (0, f"SERVING: 127.0.0.1:{_port(h)} (mTLS)"), out
    finally:
        await h.close()


# --- reading the settings ----------------------------------------------------------------


def test_settings_come_from_the_same_variables_as_serve(certs):
    probe = probe_from_environment(
        {"NEXUS_TLS_CERT": str(certs / "server.pem"), "NEXUS_TLS_KEY": str(certs / "server.key")}
    )
    assert probe.tls and probe.server_name == "nexus.lan" and probe.certificate_chain is None
    assert probe.root_certificates == (certs / "server.pem").read_bytes()
    with pytest.raises(HealthConfigError, match="go together"):
        probe_from_environment({"NEXUS_TLS_CERT": str(certs / "server.pem")})
    with pytest.raises(HealthConfigError, match="go together"):
        probe_from_environment(
            {
                "NEXUS_TLS_CERT": str(certs / "server.pem"),
                "NEXUS_TLS_KEY": str(certs / "server.key"),
                "NEXUS_TLS_CLIENT_CA": str(certs / "client-ca.pem"),
                "NEXUS_HEALTH_CLIENT_CERT": str(certs / "client.pem"),
            }
        )


def test_certificate_names_are_read_from_the_file(certs, tmp_path):
    assert certificate_names(str(certs / "server.pem")) == ["nexus.lan"]
    # The common name counts only without alternative names, as in verification.
    assert certificate_names(str(certs / "wildcard.pem")) == ["*.nexus.lan"]
    assert certificate_names(str(certs / "client.pem")) == ["healthcheck"]
    not_pem = tmp_path / "x.pem"
    not_pem.write_text("hello")
    assert certificate_names(str(not_pem)) == []
