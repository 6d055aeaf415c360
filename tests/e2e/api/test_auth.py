"""API keys, per-user authorisation and TLS/mTLS against the real server.

The walk tests derive the RPC list from the service descriptors, so a new
RPC is covered the day it is added: every method must refuse a call without
a key, and every method whose request carries a ``user_id`` (at any depth)
must refuse a user the key does not hold.

What the interceptor decides of one call (a missing, malformed or unknown
key, an admin-only method, a user the key does not hold, the principal and
tenant a servicer sees) is in tests/unit/test_auth_interceptor.py; the key
file, the bearer key and the user ids of a request in
tests/unit/test_auth_keys.py (the keys and the walk that sets a request's
user ids are one copy, tests/auth_walk.py, which that file proves). Here: the wiring, every
RPC behind the check over the wire, and TLS (the settings' own checks are
in tests/unit/test_auth_tls_settings.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import grpc.aio
import pytest
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.rpc.auth import (
    ADMIN_METHODS,
    DOMAIN_CHECKS_USER,
)
from tests.auth_walk import ADMIN_KEY, ALICE_KEY, ANY_KEY, KEY_FILE, OUTSIDER, has_user, request_for
from tests.support import METHODS, bearer, start_harness
from tests.tls_certificates import ca_server_and_client, openssl_or_skip

# The key checks run on SQLite and on PostgreSQL (tests/conftest.py): a refused
# call must write nothing on either store.
BOTH_STORES = True


# Calls are answered before any work, so one deadline fits all.
CALL_TIMEOUT = 10


def key_file(path: Path) -> Path:
    path.write_text(json.dumps(KEY_FILE))
    return path


@pytest.fixture
async def auth_harness(tmp_path, store_settings):
    h = await start_harness(
        tmp_path / "data",
        auth_keys_file=str(key_file(tmp_path / "keys.json")),
        **store_settings,
    )
    yield h
    await h.close()


def _path(service, method) -> str:
    return f"/{service.full_name}/{method.name}"


async def call(
    channel: grpc.aio.Channel, service, method, request: Message, metadata=()
) -> grpc.StatusCode:
    """Calls any method generically; returns the final status code."""
    response_class = GetMessageClass(method.output_type)
    kwargs = dict(
        request_serializer=type(request).SerializeToString,
        response_deserializer=response_class.FromString,
    )
    try:
        if method.server_streaming:
            stream = channel.unary_stream(_path(service, method), **kwargs)(
                request, metadata=metadata, timeout=CALL_TIMEOUT
            )
            async for _ in stream:
                pass
        elif method.client_streaming:
            await channel.stream_unary(_path(service, method), **kwargs)(
                iter([request, request]), metadata=metadata, timeout=CALL_TIMEOUT
            )
        else:
            await channel.unary_unary(_path(service, method), **kwargs)(
                request, metadata=metadata, timeout=CALL_TIMEOUT
            )
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


USER_METHODS = [(s, m) for s, m in METHODS if has_user(m.input_type)]


async def test_every_method_refuses_a_call_without_a_key(auth_harness):
    channel = auth_harness.channel
    codes = await asyncio.gather(*(call(channel, s, m, request_for(m)) for s, m in METHODS))
    wrong = {m.name: c for (_, m), c in zip(METHODS, codes, strict=True)}
    assert all(c == grpc.StatusCode.UNAUTHENTICATED for c in wrong.values()), wrong
    assert len(METHODS) > 40


async def test_every_method_refuses_an_unknown_key(auth_harness):
    """Malformed headers read as no key (tests/unit/test_auth_keys.py) and are
    refused as missing ones (tests/unit/test_auth_interceptor.py)."""
    channel = auth_harness.channel
    metadata = bearer("not-a-key-we-issued-000000")
    codes = await asyncio.gather(
        *(call(channel, s, m, request_for(m), metadata) for s, m in METHODS)
    )
    assert set(codes) == {grpc.StatusCode.UNAUTHENTICATED}


async def test_every_user_scoped_method_refuses_a_user_the_key_does_not_hold(auth_harness):
    channel = auth_harness.channel
    codes = await asyncio.gather(
        *(call(channel, s, m, request_for(m, OUTSIDER), bearer(ALICE_KEY)) for s, m in USER_METHODS)
    )
    wrong = {m.name: c for (_, m), c in zip(USER_METHODS, codes, strict=True)}
    # Forgetting and exporting a user answer as for a user who holds nothing
    # (the domain's own check): a key learns nothing of a user it may not see.
    as_nothing = {m.name for s, m in USER_METHODS if _path(s, m) in DOMAIN_CHECKS_USER}
    assert as_nothing == {"ForgetUser", "ExportUser"}
    assert all(wrong.pop(name) == grpc.StatusCode.NOT_FOUND for name in as_nothing), wrong
    assert all(c == grpc.StatusCode.PERMISSION_DENIED for c in wrong.values()), wrong


async def test_the_same_calls_pass_the_check_for_held_users_and_wildcard_keys(auth_harness):
    channel = auth_harness.channel
    # Admin-only methods refuse these keys whatever the user (tested below).
    methods = [(s, m) for s, m in USER_METHODS if _path(s, m) not in ADMIN_METHODS]
    for key, user in ((ALICE_KEY, "alice"), (ALICE_KEY, "bob"), (ANY_KEY, OUTSIDER)):
        codes = await asyncio.gather(
            *(call(channel, s, m, request_for(m, user), bearer(key)) for s, m in methods)
        )
        refused = {
            m.name: c
            for (_, m), c in zip(methods, codes, strict=True)
            if c in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
        }
        assert not refused, (key, user, refused)


async def test_admin_acts_for_anyone_and_only_admin_reconciles(auth_harness):
    memory = auth_harness.memory
    created = await memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER, title="t", content="likes tea", user_id="carol"
            )
        ),
        metadata=bearer(ADMIN_KEY),
    )
    assert created.user_id == "carol"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.GetMemory(
            memory_pb2.GetMemoryRequest(id=created.id, user_id="carol"), metadata=bearer(ALICE_KEY)
        )
    got = await memory.GetMemory(
        memory_pb2.GetMemoryRequest(id=created.id, user_id="carol"), metadata=bearer(ANY_KEY)
    )
    assert got.content == "likes tea"
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    for key in (ALICE_KEY, ANY_KEY):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await memory.ReconcileIndex(memory_pb2.ReconcileIndexRequest(), metadata=bearer(key))
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    await memory.ReconcileIndex(memory_pb2.ReconcileIndexRequest(), metadata=bearer(ADMIN_KEY))


async def test_a_refused_call_does_no_work(auth_harness):
    memory = auth_harness.memory
    with pytest.raises(grpc.aio.AioRpcError):
        await memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session(name="x"))
        )
    with pytest.raises(grpc.aio.AioRpcError):
        await memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_USER, title="t", content="c", user_id=OUTSIDER
                )
            ),
            metadata=bearer(ALICE_KEY),
        )
    sessions = await memory.ListSessions(
        memory_pb2.ListSessionsRequest(), metadata=bearer(ADMIN_KEY)
    )
    assert list(sessions.sessions) == []
    memories = await memory.ListMemories(
        memory_pb2.ListMemoriesRequest(scope=memory_pb2.MemoryScope(user_id=OUTSIDER)),
        metadata=bearer(ADMIN_KEY),
    )
    assert list(memories.memories) == []


async def test_health_and_reflection_stay_open_without_a_key(auth_harness):
    channel = auth_harness.channel
    reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")])
    )
    names = set()
    async for response in responses:
        names |= {s.name for s in response.list_services_response.service}
    assert "nexus.memory.v1.MemoryService" in names


# --- TLS ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and a client one."""
    openssl_or_skip()
    return ca_server_and_client(tmp_path_factory.mktemp("certs"))


async def _health(channel: grpc.aio.Channel) -> grpc.StatusCode:
    try:
        await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def test_tls_with_a_key_through_the_typed_client(tmp_path, certs):
    h = await start_harness(
        tmp_path / "data",
        tls_cert=str(certs / "server.pem"),
        tls_key=str(certs / "server.key"),
        auth_keys_file=str(key_file(tmp_path / "keys.json")),
    )
    try:
        ca = (certs / "ca.pem").read_bytes()
        async with NexusClient(h.target, api_key=ALICE_KEY, root_certificates=ca) as client:
            status = await client.get_service_status()
            assert status.schema_version > 0
        async with NexusClient(h.target, root_certificates=ca) as client:
            with pytest.raises(NexusClientError) as err:
                await client.get_service_status()
            assert err.value.code == grpc.StatusCode.UNAUTHENTICATED
        # Plaintext to a TLS port never gets an answer.
        assert await _health(h.channel) == grpc.StatusCode.UNAVAILABLE
        # A CA that did not sign the server certificate is refused.
        other = (certs / "client.pem").read_bytes()
        async with grpc.aio.secure_channel(h.target, grpc.ssl_channel_credentials(other)) as ch:
            assert await _health(ch) == grpc.StatusCode.UNAVAILABLE
    finally:
        await h.close()


async def test_mtls_requires_a_client_certificate(tmp_path, certs):
    h = await start_harness(
        tmp_path / "data",
        tls_cert=str(certs / "server.pem"),
        tls_key=str(certs / "server.key"),
        tls_client_ca=str(certs / "ca.pem"),
    )
    try:
        ca = (certs / "ca.pem").read_bytes()
        async with grpc.aio.secure_channel(h.target, grpc.ssl_channel_credentials(ca)) as ch:
            assert await _health(ch) == grpc.StatusCode.UNAVAILABLE
        creds = grpc.ssl_channel_credentials(
            ca,
            private_key=(certs / "client.key").read_bytes(),
            certificate_chain=(certs / "client.pem").read_bytes(),
        )
        async with grpc.aio.secure_channel(h.target, creds) as ch:
            assert await _health(ch) == grpc.StatusCode.OK
    finally:
        await h.close()


GRPCURL = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")
HAVE_GRPCURL = Path(GRPCURL).exists()


async def _grpcurl(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        GRPCURL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_grpcurl_with_tls_and_a_key_as_documented(tmp_path, certs):
    if not HAVE_GRPCURL:
        pytest.skip("grpcurl not installed")
    h = await start_harness(
        tmp_path / "data",
        tls_cert=str(certs / "server.pem"),
        tls_key=str(certs / "server.key"),
        auth_keys_file=str(key_file(tmp_path / "keys.json")),
    )
    try:
        ca = str(certs / "ca.pem")
        rpc = "nexus.memory.v1.MemoryService/GetServiceStatus"
        rc, out = await _grpcurl("-cacert", ca, h.target, "list")
        assert rc == 0 and "nexus.memory.v1.MemoryService" in out, out
        rc, out = await _grpcurl("-cacert", ca, "-H", f"authorization: Bearer {ALICE_KEY}",
                                 h.target, rpc)  # fmt: skip
        assert rc == 0 and "schema_version" in out, out
        rc, out = await _grpcurl("-cacert", ca, h.target, rpc)
        assert rc != 0 and "Unauthenticated" in out, out
    finally:
        await h.close()


async def _doctor(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nexus_grpc.cli", "doctor", "--timeout", "10", *args,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_doctor_with_tls_and_a_key(tmp_path, certs):
    h = await start_harness(
        tmp_path / "data",
        tls_cert=str(certs / "server.pem"),
        tls_key=str(certs / "server.key"),
        auth_keys_file=str(key_file(tmp_path / "keys.json")),
    )
    try:
        ca = str(certs / "ca.pem")
        rc, out = await _doctor("--target", h.target, "--cacert", ca, "--api-key", ALICE_KEY)
        assert "schema version" in out and "event loop" in out, out
        assert rc in (0, 1), out  # serving, or degraded (no Ollama in this harness)
        # The key may come from the environment instead of the command line.
        rc, out = await _doctor("--target", h.target, "--cacert", ca,
                                env={"NEXUS_API_KEY": ALICE_KEY})  # fmt: skip
        assert "schema version" in out, out
        # Without a key the health check answers but the status is refused, and said so.
        rc, out = await _doctor("--target", h.target, "--cacert", ca, env={"NEXUS_API_KEY": ""})
        assert "SERVING" in out and "UNAUTHENTICATED" in out and "schema version" not in out, out
        rc, out = await _doctor("--target", h.target, "--cert", ca)
        assert rc != 0 and "--cert and --key go together" in out, out
    finally:
        await h.close()
