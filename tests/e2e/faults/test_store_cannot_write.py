"""A store that answers reads but fails every write is not serving.

The fourth probe limited a running SQLite server's file size (``prlimit
--fsize``, as a full disk would): every CreateMemory and CreateProject
answered INTERNAL while gRPC health said SERVING, because the health probe
only read. Here writes that fail for the storage's sake answer UNAVAILABLE
saying the store cannot write, health turns NOT_SERVING within seconds, and
both come back once writes succeed: SQLite under a real file-size limit (the
real ``nexus-grpc serve`` as a subprocess, so only its writes fail), and
PostgreSQL made read-only (what a failover onto a standby does).
"""

from __future__ import annotations

import resource

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.client.connection import open_channel
from nexus_grpc.core.storage import CANNOT_WRITE
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from tests import pg
from tests.process import ServerProcess
from tests.support import start_harness, wait_until

SERVING = health_pb2.HealthCheckResponse.SERVING
DOWN = health_pb2.HealthCheckResponse.NOT_SERVING


def project(name: str) -> memory_pb2.CreateProjectRequest:
    return memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name=name))


async def _refused_then_recovered(memory, health, lift, before=("before",)) -> None:
    """The store already fails writes: a write is UNAVAILABLE saying so, health
    turns NOT_SERVING; after ``lift()`` health is SERVING again and writes
    go through. ``before``: the projects written before writes failed."""
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await memory.CreateProject(project("while full"))
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE, err.value.details()
    assert CANNOT_WRITE in err.value.details()

    async def status() -> int:
        return (await health.Check(health_pb2.HealthCheckRequest())).status

    async def down() -> bool:
        return await status() == DOWN

    await wait_until(down, timeout=10)
    # Reads still answer, from what was written before.
    listed = await memory.ListProjects(memory_pb2.ListProjectsRequest())
    assert [p.name for p in listed.projects] == list(before)
    lift()

    async def serving() -> bool:
        return await status() == SERVING

    await wait_until(serving, timeout=10)
    created = await memory.CreateProject(project("after"))
    listed = await memory.ListProjects(memory_pb2.ListProjectsRequest())
    assert [p.name for p in listed.projects] == [*before, "after"]
    assert created.name == "after"


@pytest.mark.timeout(90)
async def test_sqlite_past_its_file_size_limit_is_unavailable_and_not_serving(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    channel = open_channel(f"127.0.0.1:{server.port}", retry=None)
    try:
        memory = memory_grpc.MemoryServiceStub(channel)
        health = health_pb2_grpc.HealthStub(channel)
        await memory.CreateProject(project("before"))
        assert server.proc is not None
        pid = server.proc.pid
        # Every file write past 4 KiB fails (EFBIG), as on a full disk; the
        # server's files are all larger already.
        _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (4096, hard))

        def lift() -> None:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))

        try:
            await _refused_then_recovered(memory, health, lift)
        finally:
            lift()
        assert "INTERNAL" not in "".join(server.log)
    finally:
        await channel.close()
        server.stop()


async def test_postgresql_that_cannot_write_is_unavailable_and_not_serving(tmp_path, pg_url):
    h = await start_harness(tmp_path / "data", database_url=pg_url)
    admin = pg.server().get_uri()

    def read_only(on: bool) -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            if on:
                conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            else:
                conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
            conn.execute("SELECT pg_reload_conf()")

    health = health_pb2_grpc.HealthStub(h.channel)
    try:
        await h.memory.CreateProject(project("before"))
        read_only(True)
        try:
            # The reload reaches each pooled session once it has read its
            # signal, so a probe can be written and its removal refused.
            written = ["before"]
            await wait_until(_writes_refused(h.memory, written), timeout=10)
            await _refused_then_recovered(
                h.memory, health, lambda: read_only(False), before=tuple(written)
            )
        finally:
            read_only(False)
    finally:
        await h.close()


def _writes_refused(memory, written: list[str]):
    """A predicate: true once a write is refused as UNAVAILABLE. A probe that
    was written but could not be removed is added to ``written``."""

    async def refused() -> bool:
        try:
            created = await memory.CreateProject(project("probe"))
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc.details()
            return True
        try:
            await memory.DeleteProject(memory_pb2.DeleteProjectRequest(id=created.id))
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc.details()
            written.append("probe")
            return True
        return False

    return refused
