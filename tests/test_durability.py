"""A write that returned OK survives kill -9, and reaches the index after restart."""

from __future__ import annotations

import asyncio
import random
import sqlite3

import grpc

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as m
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as mgrpc
from tests.process import ServerProcess


async def _ingest_until_killed(server: ServerProcess, session_id: int, acked: set[int],
                               stop_after: int) -> None:
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = mgrpc.MemoryServiceStub(channel)

        async def writer(worker: int) -> None:
            for i in range(10_000):
                try:
                    ep = await stub.CreateEpisode(m.CreateEpisodeRequest(
                        session_id=session_id, user_message=f"durable note {worker}-{i}",
                        ai_response="saved", request_id=f"w{worker}-{i}-{random.random()}"))
                except grpc.aio.AioRpcError:
                    return  # the server died under us
                acked.add(ep.id)
                if len(acked) >= stop_after:
                    server.kill()
                    return

        await asyncio.gather(*[writer(w) for w in range(8)])


async def test_acknowledged_episodes_survive_kill_9_and_get_indexed(tmp_path):
    data = tmp_path / "data"
    acked: set[int] = set()
    server = ServerProcess(data).start()
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = mgrpc.MemoryServiceStub(channel)
            session = await stub.CreateSession(m.CreateSessionRequest(session=m.Session()))
        for round_ in range(2):
            await _ingest_until_killed(server, session.id, acked, stop_after=150 * (round_ + 1))
            server = ServerProcess(data).start()
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = mgrpc.MemoryServiceStub(channel)
            # Every acknowledged episode is there, and FTS finds it.
            for episode_id in sorted(acked)[:: max(1, len(acked) // 25)]:
                ep = await stub.GetEpisode(m.GetEpisodeRequest(id=episode_id))
                words = ep.user_message.split()[-1]
                hits = [h async for h in stub.SearchEpisodes(m.SearchEpisodesRequest(
                    query=f"durable {words}", session_id=session.id,
                    mode=m.SEARCH_MODE_KEYWORD, limit=100))]
                assert episode_id in {h.episode.id for h in hits}
            # After restart the backlog drains: every episode indexed, no duplicates.
            for _ in range(600):
                status = await stub.GetServiceStatus(m.GetServiceStatusRequest())
                depth = {q.kind: q.pending for q in status.queues}
                if depth["index:episodes"] == 0:
                    break
                await asyncio.sleep(0.1)  # no event crosses the process boundary
            assert depth["index:episodes"] == 0
    finally:
        server.terminate()
    with sqlite3.connect(data / "nexus.sqlite3") as conn:
        ids = {r[0] for r in conn.execute("SELECT id FROM episodes")}
        assert acked <= ids
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('integrity-check')")
        states = {r[0] for r in conn.execute("SELECT DISTINCT embed_state FROM episodes")}
        assert states == {2}
    from nexus_grpc.vectors import EdgeVectorIndex

    index = EdgeVectorIndex(data / "vectors")
    try:
        assert await index.count("episodes") == len(ids)
        point_ids: list[int] = []
        async for page in index.ids("episodes"):
            point_ids += page
        assert sorted(point_ids) == sorted(ids)
    finally:
        await index.close()


async def test_sigterm_turns_health_not_serving_and_exits_cleanly(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = mgrpc.MemoryServiceStub(channel)
        s = await stub.CreateSession(m.CreateSessionRequest(session=m.Session()))
        ep = await stub.CreateEpisode(m.CreateEpisodeRequest(session_id=s.id, user_message="x"))
    assert server.terminate() == 0
    server = ServerProcess(tmp_path / "data").start()
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            got = await mgrpc.MemoryServiceStub(channel).GetEpisode(m.GetEpisodeRequest(id=ep.id))
            assert got.user_message == "x"
    finally:
        server.terminate()
