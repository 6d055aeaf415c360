"""``nexus-grpc doctor``'s wording and the health check's settings
(nexus_grpc/ops/against_server/doctor.py), on plain values: a queue's age at
each unit's edge, the name a certificate is checked against, the probe an
mTLS server's environment gives, and (a scripted client in place of
NexusClient) the exit status each answer or failure gives. The status report's
lines are tests/unit/test_client_doctor_report.py's. Dialling a server is
tests/e2e/api/test_auth.py's and tests/e2e/server/test_health_check_command.py's;
local_target and the plain and TLS probes are tests/unit/test_server_settings.py's."""

from __future__ import annotations

import io

import grpc
import pytest

from nexus_grpc.client.base import NexusClientError
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server import doctor as doctor_module
from nexus_grpc.ops.against_server.doctor import (
    EXIT_DEGRADED,
    EXIT_SERVING,
    EXIT_UNHEALTHY,
    EXIT_UNREACHABLE,
    HEALTH_CLIENT_CERT_ENV,
    HEALTH_CLIENT_KEY_ENV,
    HealthConfigError,
    HealthProbe,
    _age,
    _checkable_name,
    certificate_names,
    probe_from_environment,
)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.0, "-"), (-3.0, "-"), (4.25, "4.2s"), (119.9, "119.9s"), (120.0, "2.0m"),
     (7199.0, "120.0m"), (7200.0, "2.0h"), (90_000.0, "25.0h")],
)  # fmt: skip
def test_a_queues_oldest_age_is_shown_in_seconds_minutes_or_hours(seconds, shown):
    assert _age(seconds) == shown


def test_a_plain_name_is_checked_before_a_wildcard_whose_star_is_filled():
    assert _checkable_name(["*.nexus.lan", "nexus.lan"]) == "nexus.lan"
    assert _checkable_name(["*.nexus.lan"]) == "health.nexus.lan"
    assert _checkable_name(["*bad.lan"]) is None
    assert _checkable_name([]) is None


def test_a_file_that_is_not_a_certificate_has_no_names(tmp_path):
    junk = tmp_path / "server.pem"
    junk.write_bytes(b"not a certificate")
    assert certificate_names(str(junk)) == []
    assert certificate_names(str(tmp_path / "missing.pem")) == []


def _tls_files(tmp_path):
    (tmp_path / "server.pem").write_bytes(b"server chain")
    (tmp_path / "server.key").write_bytes(b"server key")
    (tmp_path / "client.pem").write_bytes(b"client chain")
    (tmp_path / "client.key").write_bytes(b"client key")
    return {
        "NEXUS_LISTEN": "[::]:7443",
        "NEXUS_TLS_CERT": str(tmp_path / "server.pem"),
        "NEXUS_TLS_KEY": str(tmp_path / "server.key"),
        "NEXUS_TLS_CLIENT_CA": str(tmp_path / "ca.pem"),
    }


def test_with_a_client_ca_the_probe_presents_the_servers_own_certificate(tmp_path):
    probe = probe_from_environment(_tls_files(tmp_path))
    assert probe == HealthProbe(
        "[::1]:7443",
        tls=True,
        root_certificates=b"server chain",
        certificate_chain=b"server chain",
        private_key=b"server key",
        server_name=None,  # the file names nothing it could be checked against
        own_client_certificate=True,
    )
    assert probe.describe() == "[::1]:7443 (mTLS)"


def test_a_health_client_certificate_replaces_the_servers_own(tmp_path):
    env = _tls_files(tmp_path) | {
        HEALTH_CLIENT_CERT_ENV: str(tmp_path / "client.pem"),
        HEALTH_CLIENT_KEY_ENV: str(tmp_path / "client.key"),
    }
    probe = probe_from_environment(env)
    assert (probe.certificate_chain, probe.private_key) == (b"client chain", b"client key")
    assert probe.root_certificates == b"server chain"  # the server is still pinned
    assert probe.own_client_certificate is False


def test_a_health_client_key_without_its_certificate_is_refused(tmp_path):
    env = _tls_files(tmp_path) | {HEALTH_CLIENT_KEY_ENV: str(tmp_path / "client.key")}
    with pytest.raises(HealthConfigError, match="NEXUS_HEALTH_CLIENT_CERT and .* go together"):
        probe_from_environment(env)


def test_an_unreadable_health_client_key_is_named(tmp_path):
    env = _tls_files(tmp_path) | {
        HEALTH_CLIENT_CERT_ENV: str(tmp_path / "client.pem"),
        HEALTH_CLIENT_KEY_ENV: str(tmp_path / "gone.key"),
    }
    with pytest.raises(HealthConfigError, match=f"{HEALTH_CLIENT_KEY_ENV}: cannot read"):
        probe_from_environment(env)


def test_a_probe_describes_how_it_dials():
    assert HealthProbe("127.0.0.1:50051").describe() == "127.0.0.1:50051 (plaintext)"
    assert HealthProbe("h:1", tls=True).describe() == "h:1 (TLS)"


# ---- the exit status, with a scripted client in place of NexusClient -------------------------


class ScriptedClient:
    """What doctor and health_check ask of NexusClient, answered from a script."""

    script: dict = {}
    opened: list = []

    def __init__(self, target: str, **kw: object) -> None:
        ScriptedClient.opened.append((target, kw))

    async def __aenter__(self) -> ScriptedClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def wait_ready(self, timeout: float) -> None:  # noqa: ASYNC109 - NexusClient's
        if self.script.get("ready") is not None:
            raise self.script["ready"]

    async def _answer(self, name: str) -> object:
        found = self.script[name]
        if isinstance(found, Exception):
            raise found
        return found

    async def check_health(self) -> object:
        return await self._answer("health")

    async def get_service_status(self) -> object:
        return await self._answer("status")


def _fail(code: grpc.StatusCode) -> NexusClientError:
    return NexusClientError(code, "said no")


SERVING = memory_pb2.ServiceStatus(state="SERVING")


@pytest.mark.parametrize(
    ("script", "code", "says"),
    [
        ({"ready": TimeoutError()}, EXIT_UNREACHABLE, "unreachable: no connection within 2s"),
        ({"health": _fail(grpc.StatusCode.UNAVAILABLE)}, EXIT_UNREACHABLE, "unreachable: "),
        ({"health": "SERVING", "status": SERVING}, EXIT_SERVING, "state             SERVING"),
        ({"health": "SERVING", "status": memory_pb2.ServiceStatus(state="DEGRADED")},
         EXIT_DEGRADED, "state             DEGRADED"),
        ({"health": "NOT_SERVING", "status": SERVING}, EXIT_DEGRADED,
         "health check      NOT_SERVING"),
        ({"health": _fail(grpc.StatusCode.INTERNAL), "status": SERVING}, EXIT_DEGRADED,
         "health check      error (INTERNAL: said no)"),
        ({"health": "SERVING", "status": _fail(grpc.StatusCode.UNAUTHENTICATED)}, EXIT_SERVING,
         "service status    unavailable: UNAUTHENTICATED: said no"),
        ({"health": "NOT_SERVING", "status": _fail(grpc.StatusCode.PERMISSION_DENIED)},
         EXIT_DEGRADED, "service status    unavailable"),
        ({"health": "SERVING", "status": _fail(grpc.StatusCode.DEADLINE_EXCEEDED)},
         EXIT_UNREACHABLE, "service status    unavailable"),
    ],
)  # fmt: skip
async def test_doctors_exit_status_says_serving_degraded_or_unreachable(
    monkeypatch, script, code, says
):
    monkeypatch.setattr(doctor_module, "NexusClient", ScriptedClient)
    monkeypatch.setattr(ScriptedClient, "script", script)
    out = io.StringIO()
    assert await doctor_module.doctor("h:1", 2.0, out=out) == code
    assert out.getvalue().startswith("nexus-grpc doctor: h:1\n")
    assert says in out.getvalue()


@pytest.mark.parametrize(
    ("health", "code", "line"),
    [
        ("SERVING", EXIT_SERVING, "SERVING: h:1 (plaintext)\n"),
        ("NOT_SERVING", EXIT_UNHEALTHY, "NOT_SERVING: h:1 (plaintext)\n"),
        (_fail(grpc.StatusCode.UNAVAILABLE), EXIT_UNHEALTHY,
         "unhealthy: h:1 (plaintext): UNAVAILABLE: said no\n"),
    ],
)  # fmt: skip
async def test_the_health_check_is_healthy_only_when_serving(monkeypatch, health, code, line):
    monkeypatch.setattr(doctor_module, "NexusClient", ScriptedClient)
    monkeypatch.setattr(ScriptedClient, "script", {"health": health})
    out = io.StringIO()
    assert await doctor_module.health_check(HealthProbe("h:1"), 2.0, out=out) == code
    assert out.getvalue() == line


async def test_a_refused_mtls_check_with_the_servers_own_certificate_says_what_to_set(monkeypatch):
    monkeypatch.setattr(doctor_module, "NexusClient", ScriptedClient)
    monkeypatch.setattr(ScriptedClient, "script", {"health": _fail(grpc.StatusCode.UNAVAILABLE)})
    monkeypatch.setattr(ScriptedClient, "opened", [])
    probe = HealthProbe(
        "h:1", tls=True, certificate_chain=b"c", server_name="nexus.lan",
        own_client_certificate=True,
    )  # fmt: skip
    out = io.StringIO()
    assert await doctor_module.health_check(probe, 2.0, out=out) == EXIT_UNHEALTHY
    assert out.getvalue().startswith("unhealthy: h:1 (mTLS): UNAVAILABLE: said no (mTLS: the")
    assert f"set {HEALTH_CLIENT_CERT_ENV} and {HEALTH_CLIENT_KEY_ENV} to a client" in out.getvalue()
    [(_, options)] = ScriptedClient.opened
    assert options["options"] == [("grpc.ssl_target_name_override", "nexus.lan")]
    assert options["retry"] is None  # one try, within Docker's timeout
