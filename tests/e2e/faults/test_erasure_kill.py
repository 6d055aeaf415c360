"""An erasure survives kill -9: the real ``nexus-grpc serve`` forgets a user
who holds a thousand episodes, is killed while the steps run, and finishes
the erasure after it starts again; then none of the user's words is in any
file of the data directory, and every word of the other user is."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from tests.process import ServerProcess

EPISODES = 1000  # five steps of the erasure
ALICE, BOB = "zqkwvtalicewords", "zqkwvtbobwords"
# What of a word is on disk whole whatever prefix FTS5 shares with the term before.
ALICE_TAIL, BOB_TAIL = b"alicewords", b"bobwords"


async def _fill(memory, user: str, word: str, project_id: int) -> None:
    session = await memory.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(project_id=project_id, user_id=user)
        )
    )
    requests = [
        memory_pb2.ImportEpisodesRequest(
            episode=memory_pb2.CreateEpisodeRequest(
                session_id=session.id,
                user_message=f"{word}{i:04d} said",
                ai_response="ok",
                request_id=f"{user}-{i}",
            )
        )
        for i in range(EPISODES if user == "alice" else 20)
    ]
    await memory.ImportEpisodes(iter(requests))


def _bytes(data: Path) -> bytes:
    return b"".join(p.read_bytes() for p in data.rglob("*") if p.is_file())


async def test_an_erasure_killed_midway_completes_after_the_restart(tmp_path):
    server = ServerProcess(tmp_path / "data", "--vector-prewarm-mb", "0").start()
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            memory = memory_grpc.MemoryServiceStub(channel)
            project = await memory.CreateProject(
                memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
            )
            await _fill(memory, "alice", ALICE, project.id)
            await _fill(memory, "bob", BOB, project.id)
            started = await memory.ForgetUser(memory_pb2.ForgetUserRequest(user_id="alice"))
            assert started.planned.episodes == EPISODES
            deadline = time.monotonic() + 60
            while True:
                now = await memory.GetErasure(memory_pb2.GetErasureRequest(id=started.id))
                if now.counts.episodes > 0:
                    break
                assert time.monotonic() < deadline, server.log_tail()
                await asyncio.sleep(0.005)
        server.kill()
        assert now.state == memory_pb2.ERASURE_STATE_RUNNING, "done before the kill"
        assert now.counts.episodes < EPISODES

        server.start()
        async with grpc.aio.insecure_channel(server.target) as channel:
            memory = memory_grpc.MemoryServiceStub(channel)
            last = None
            async for last in memory.WatchErasure(
                memory_pb2.WatchErasureRequest(id=started.id), timeout=120
            ):
                if last.state == memory_pb2.ERASURE_STATE_DONE:
                    break
            assert last is not None and last.state == memory_pb2.ERASURE_STATE_DONE
            # Every episode counted once, across the kill.
            assert last.counts.episodes == EPISODES and last.counts.sessions == 1
    finally:
        server.stop()
    on_disk = _bytes(tmp_path / "data")
    assert ALICE_TAIL not in on_disk
    assert BOB_TAIL in on_disk
