"""An admin key sees every tenant, but looks names up, imports and restores in
its own: on both stores.

The probe: ``GetSession`` by ``external_id`` with tenant B's admin key
answered tenant A's (older) session of that id, so ``nexus-grpc import`` with
that key, after a restore had put the same external ids into B, wrote an
episode into A's session. External ids are unique per tenant only; a lookup
across tenants picks one of several.
"""

from __future__ import annotations

import io
import json

import grpc
import grpc.aio
import pytest

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.transfer import export_project, import_project, restore_project
from tests.support import Harness, bearer, start_harness

BOTH_STORES = True

A_USER = "alpha-user-key-0000000001"
A_ADMIN = "alpha-admin-key-000000001"
B_USER = "beta-user-key-00000000001"
B_ADMIN = "beta-admin-key-0000000001"
EXT = "5e7a0000-0000-4000-8000-00000000a11a"


@pytest.fixture
async def tenants(tmp_path, store_settings):
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": A_USER, "name": "alpha-app", "users": "*", "tenant": "alpha"},
                    {"key": A_ADMIN, "name": "alpha-ops", "admin": True, "tenant": "alpha"},
                    {"key": B_USER, "name": "beta-app", "users": "*", "tenant": "beta"},
                    {"key": B_ADMIN, "name": "beta-ops", "admin": True, "tenant": "beta"},
                ]
            }
        )
    )
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys), **store_settings)
    yield h
    await h.close()


async def _alpha(h: Harness) -> tuple[int, int]:
    """Tenant alpha's project, and its session with external id EXT (one episode)."""
    a = bearer(A_USER)
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="alpha")), metadata=a
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(external_id=EXT, project_id=project.id)
        ),
        metadata=a,
    )
    await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message="alpha's own words"),
        metadata=a,
    )
    return project.id, session.id


async def episodes_of(h: Harness, session_id: int) -> int:
    return await h.app.db.read_sql(
        lambda c: int(
            c.execute("SELECT COUNT(*) FROM episodes WHERE session_id = ?", (session_id,))
            .fetchone()[0]
        )
    )


async def test_an_external_id_is_looked_up_in_the_keys_own_tenant_unless_an_admin_names_one(
    tenants,
):
    h = tenants
    _, alpha_session = await _alpha(h)
    by_ext = memory_pb2.GetSessionRequest(external_id=EXT)
    # Beta's admin sees every tenant by id, but its external ids are its own.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.GetSession(by_ext, metadata=bearer(B_ADMIN))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    got = await h.memory.GetSession(memory_pb2.GetSessionRequest(id=alpha_session),
                                    metadata=bearer(B_ADMIN))  # fmt: skip
    assert got.id == alpha_session
    # Beta gets a session of that external id too (unique per tenant): each key finds its own.
    beta = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(external_id=EXT)),
        metadata=bearer(B_USER),
    )
    for key, expected in ((B_ADMIN, beta.id), (B_USER, beta.id), (A_ADMIN, alpha_session),
                          (A_USER, alpha_session)):  # fmt: skip
        assert (await h.memory.GetSession(by_ext, metadata=bearer(key))).id == expected
    # An admin acting across tenants names the tenant.
    named = memory_pb2.GetSessionRequest(external_id=EXT, tenant="alpha")
    assert (await h.memory.GetSession(named, metadata=bearer(B_ADMIN))).id == alpha_session
    # A key naming its own tenant is answered; naming another is not its to do.
    own = memory_pb2.GetSessionRequest(external_id=EXT, tenant="beta")
    assert (await h.memory.GetSession(own, metadata=bearer(B_USER))).id == beta.id
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.GetSession(named, metadata=bearer(B_USER))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "only an admin key may name another tenant" in err.value.details()


async def test_an_admins_import_and_restore_write_only_into_its_own_tenant(tenants):
    """The probe's sequence: alpha's export restored and then imported with
    beta's admin key. Both land in beta; alpha's session gains nothing."""
    h = tenants
    alpha_project, alpha_session = await _alpha(h)
    async with NexusClient(h.target, api_key=A_USER) as alpha:
        out = io.StringIO()
        await export_project(alpha, alpha_project, out)
    lines = out.getvalue().splitlines()
    async with NexusClient(h.target, api_key=B_ADMIN) as ops:
        assert (await ops.get_service_status()).tenant == "beta"
        restored = await restore_project(ops, lines)
        imported = await import_project(ops, lines)
        # The restore is beta's; the import found the restored session in beta
        # (its own tenant) and resumed there, writing nothing new.
        assert imported.project_id == restored.project_id
        assert (await ops.get_project(id=restored.project_id)).tenant == "beta"
        assert (await ops.get_project(id=alpha_project)).tenant == "alpha"
        beta_session = await ops.get_session(external_id=EXT)
        assert beta_session.id != alpha_session
        # --into a project of another tenant is refused before anything is written.
        with pytest.raises(ValueError, match="writes only into the key's own tenant"):
            await import_project(ops, lines, into=alpha_project)
        # ImportEpisodes naming another tenant's session: that item fails as a
        # missing session would; nothing is written.
        answer = await ops.import_episodes(
            iter(
                [
                    memory_pb2.ImportEpisodesRequest(
                        episode=memory_pb2.CreateEpisodeRequest(
                            session_id=alpha_session, user_message="beta", request_id="b-1"
                        )
                    )
                ]
            )
        )
        assert (answer.created, answer.failed) == (0, 1)
        assert answer.errors[0].code == grpc.StatusCode.NOT_FOUND.value[0]
    assert await episodes_of(h, alpha_session) == 1
    assert await episodes_of(h, beta_session.id) == 1
    # A non-admin key of beta cannot reach alpha's session by id either (as before).
    async with NexusClient(h.target, api_key=B_USER) as beta:
        with pytest.raises(NexusClientError) as err:
            await beta.get_session(id=alpha_session)
        assert err.value.code == grpc.StatusCode.NOT_FOUND
