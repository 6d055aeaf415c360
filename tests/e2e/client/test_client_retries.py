"""The typed client's gRPC retries, against the real server killed and restarted mid-run.

Which calls are retried, and the policy handed to gRPC: tests/unit/test_client_generated.py."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.process import ServerProcess


async def test_creates_ride_through_a_restart_without_duplicates(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    port = server.port
    restart: asyncio.Task[None] | None = None

    async def kill_and_restart() -> None:
        server.sigkill()
        assert server.proc is not None
        await asyncio.to_thread(server.proc.wait, 30)
        await asyncio.to_thread(server.start, 60.0, port)

    try:
        # wait_for_ready: calls made while the server is down wait for it; calls
        # cut off in flight fail UNAVAILABLE and gRPC resends them, with the
        # request_id the client filled in, so a create the server had already
        # stored comes back as the first episode instead of a second one.
        async with NexusClient(server.target, wait_for_ready=True, timeout=60.0) as client:
            session = await client.create_session(session=memory_pb2.Session(name="restart"))
            total = 40
            done = 0

            async def one(i: int) -> memory_pb2.Episode:
                nonlocal done, restart
                await asyncio.sleep(i * 0.025)  # some before, some during, some after
                episode = await client.create_episode(session_id=session.id, user_message=f"m{i}")
                done += 1
                if done == 10:
                    restart = asyncio.create_task(kill_and_restart())
                return episode

            episodes = await asyncio.gather(*(one(i) for i in range(total)))
            assert restart is not None, "the server was killed mid-run"
            await restart
            assert server.running() and server.port == port

            assert len({e.id for e in episodes}) == total, "each call got its own episode"
            listed = await client.list_episodes(session_id=session.id, page_size=100)
            assert sorted(e.user_message for e in listed.episodes) == sorted(
                f"m{i}" for i in range(total)
            ), "every create stored exactly once"
    finally:
        if restart is not None and not restart.done():
            await asyncio.wait([restart], timeout=60)
        server.kill()


async def test_without_wait_for_ready_a_down_server_fails_fast(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    try:
        async with NexusClient(server.target, timeout=10.0) as client:
            assert (await client.get_service_status()).schema_version > 0
            server.kill()
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(NexusClientError) as info:
                await client.get_service_status()
            assert info.value.code == grpc.StatusCode.UNAVAILABLE
            # Retried with backoff, but well within the 10 s deadline.
            assert loop.time() - started < 9
    finally:
        server.kill()
