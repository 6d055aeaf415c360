"""A project's name is unique in its tenant, so every lookup by name (``usage
--project``, the framework adapters, MCP: client/name_lookup.py) finds one
project: CreateProject and a rename answer ALREADY_EXISTS naming the project
that holds the name, concurrent creates included; an import takes a free name,
a restore is refused. On both stores."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import grpc
import grpc.aio
import pytest

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.client.name_lookup import find_or_create_project, find_project
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.transfer import export_project, restore_project
from nexus_grpc.status_details import unpack
from tests.support import Harness, bearer, start_harness

BOTH_STORES = True

NEXUS = str(Path(sys.executable).with_name("nexus-grpc"))
A_USER = "alpha-user-key-0000000001"
B_USER = "beta-user-key-00000000001"
B_ADMIN = "beta-admin-key-0000000001"
EXT = "5e7a0000-0000-4000-8000-00000000a7a5"


@pytest.fixture
async def tenants(tmp_path, store_settings):
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": A_USER, "name": "alpha-app", "users": "*", "tenant": "alpha"},
                    {"key": B_USER, "name": "beta-app", "users": "*", "tenant": "beta"},
                    {"key": B_ADMIN, "name": "beta-ops", "admin": True, "tenant": "beta"},
                ]
            }
        )
    )
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys), **store_settings)
    yield h
    await h.close()


def create(name: str, **fields) -> memory_pb2.CreateProjectRequest:
    return memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name=name, **fields))


async def refusal(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value


def holder(err: grpc.aio.AioRpcError) -> str:
    """The ResourceInfo's resource, as ``type id``."""
    from grpc_status import rpc_status

    [info] = unpack(rpc_status.from_call(err))
    return f"{info.resource_type} {info.resource_name}"


async def names(h: Harness, key: str | None = None) -> list[tuple[int, str]]:
    md = bearer(key) if key else None
    page = await h.memory.ListProjects(memory_pb2.ListProjectsRequest(page_size=100), metadata=md)
    return [(p.id, p.name) for p in page.projects]


async def test_a_second_project_of_a_name_is_refused_naming_the_first(harness):
    first = await harness.memory.CreateProject(create("atlas"))
    err = await refusal(harness.memory.CreateProject(create("atlas", description="again")))
    assert err.code() == grpc.StatusCode.ALREADY_EXISTS
    assert f"a project named 'atlas' already exists in this tenant: project {first.id}" in (
        err.details()
    )
    assert holder(err) == f"project {first.id}"
    # Nothing was written; another case or a suffix is another name.
    assert await names(harness) == [(first.id, "atlas")]
    other = await harness.memory.CreateProject(create("Atlas"))
    assert await names(harness) == [(first.id, "atlas"), (other.id, "Atlas")]


async def test_a_rename_to_a_taken_name_is_refused_and_changes_nothing(harness):
    atlas = await harness.memory.CreateProject(create("atlas"))
    borealis = await harness.memory.CreateProject(create("borealis", description="b"))
    rename = memory_pb2.UpdateProjectRequest(
        project=memory_pb2.Project(id=borealis.id, name="atlas", description="changed"),
        update_mask={"paths": ["name", "description"]},
    )
    err = await refusal(harness.memory.UpdateProject(rename))
    assert err.code() == grpc.StatusCode.ALREADY_EXISTS
    assert holder(err) == f"project {atlas.id}"
    kept = await harness.memory.GetProject(memory_pb2.GetProjectRequest(id=borealis.id))
    assert (kept.name, kept.description) == ("borealis", "b")
    # Its own name again, or a free one, is a rename like any other.
    for name in ("borealis", "cygnus"):
        rename.project.name = name
        assert (await harness.memory.UpdateProject(rename)).name == name
    rename.project.id, rename.project.name = atlas.id, "borealis"
    assert (await harness.memory.UpdateProject(rename)).name == "borealis"


async def test_concurrent_creates_of_one_name_make_one_project(harness):
    answers = await asyncio.gather(
        *(harness.memory.CreateProject(create("race")) for _ in range(8)),
        return_exceptions=True,
    )
    made = [a for a in answers if isinstance(a, memory_pb2.Project)]
    refused = [a for a in answers if isinstance(a, grpc.aio.AioRpcError)]
    assert len(made) == 1 and len(refused) == 7, answers
    assert {e.code() for e in refused} == {grpc.StatusCode.ALREADY_EXISTS}
    assert {holder(e) for e in refused} == {f"project {made[0].id}"}
    assert await names(harness) == [(made[0].id, "race")]


async def test_lookups_by_name_settle_concurrent_first_uses_on_one_project(harness):
    async with NexusClient(harness.target, retry=None) as client:
        found = await asyncio.gather(
            *(find_or_create_project(client, "assistant", description="d") for _ in range(8))
        )
        assert len(set(found)) == 1
        assert await find_project(client, "assistant") == found[0]
        assert await find_project(client, "nobody's") is None
    assert await names(harness) == [(found[0], "assistant")]


async def test_a_name_is_unique_in_its_tenant_only(tenants):
    h = tenants
    alpha = await h.memory.CreateProject(create("atlas"), metadata=bearer(A_USER))
    beta = await h.memory.CreateProject(create("atlas"), metadata=bearer(B_USER))
    assert alpha.id != beta.id
    # A refusal names only a project of the caller's own tenant.
    err = await refusal(h.memory.CreateProject(create("atlas"), metadata=bearer(B_USER)))
    assert holder(err) == f"project {beta.id}"
    rename = memory_pb2.UpdateProjectRequest(
        project=memory_pb2.Project(id=alpha.id, name="renamed"), update_mask={"paths": ["name"]}
    )
    await h.memory.UpdateProject(rename, metadata=bearer(A_USER))
    rename.project.name = "atlas"
    await h.memory.UpdateProject(rename, metadata=bearer(A_USER))


async def _alpha_export(h: Harness) -> list[str]:
    """Alpha's project "atlas" (a session, an episode), exported."""
    a = bearer(A_USER)
    project = await h.memory.CreateProject(create("atlas"), metadata=a)
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(external_id=EXT, project_id=project.id)
        ),
        metadata=a,
    )
    await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message="alpha's words"),
        metadata=a,
    )
    out = io.StringIO()
    async with NexusClient(h.target, api_key=A_USER) as alpha:
        await export_project(alpha, project.id, out)
    return out.getvalue().splitlines()


async def test_an_import_takes_a_free_name_and_a_restore_is_refused(tenants, tmp_path):
    """Into a tenant that already has an unrelated project of the file's name:
    import makes "atlas (2)" and says so; a restore, which keeps the name, is
    refused and writes nothing."""
    h = tenants
    lines = await _alpha_export(h)
    theirs = await h.memory.CreateProject(create("atlas"), metadata=bearer(B_USER))
    async with NexusClient(h.target, api_key=B_ADMIN) as ops:
        with pytest.raises(NexusClientError) as err:
            await restore_project(ops, lines)
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert f"already exists in this tenant: project {theirs.id}" in err.value.message
    assert "a restore keeps the project's name" in err.value.message
    assert await names(h, B_USER) == [(theirs.id, "atlas")]

    path = tmp_path / "atlas.jsonl"
    path.write_text("\n".join(lines) + "\n")
    done = await asyncio.to_thread(
        subprocess.run,
        [NEXUS, "import", str(path), "--target", h.target, "--api-key", B_USER],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    new_id = int(done.stdout.split()[-1])
    assert "the new project is called 'atlas (2)'" in done.stderr
    assert await names(h, B_USER) == [(theirs.id, "atlas"), (new_id, "atlas (2)")]
    session = await h.memory.GetSession(
        memory_pb2.GetSessionRequest(external_id=EXT), metadata=bearer(B_USER)
    )
    assert session.project_id == new_id
