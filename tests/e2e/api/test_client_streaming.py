"""A client-streaming call (ImportEpisodes) goes through every interceptor of
``server.interceptor_chain``: the shutdown gate, auth, and the service
interceptor's request id, deadline, concurrency cap, access log and metrics.
How long a refused stream is drained (bytes, seconds) is tested on
rpc/interception.drain directly in tests/unit/test_api_interception.py."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3

import grpc
import pytest

from nexus_grpc.app import App
from nexus_grpc.client.connection import open_channel
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.rpc.requests import RequestObserver
from nexus_grpc.runtime.config import Settings
from nexus_grpc.server import start_server
from tests.support import HashingEmbedder, bearer, wait_until

KEY = "import-key-0123456789"
IMPORT = "/nexus.memory.v1.MemoryService/ImportEpisodes"


class Recorder(RequestObserver):
    def __init__(self) -> None:
        self.calls: list[tuple[str, grpc.StatusCode]] = []

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        self.calls.append((method, code))


def item(session_id: int, i: int) -> memory_pb2.ImportEpisodesRequest:
    return memory_pb2.ImportEpisodesRequest(
        episode=memory_pb2.CreateEpisodeRequest(
            session_id=session_id, user_message=f"turn {i}", request_id=f"r{i}"
        )
    )


@pytest.fixture
async def server(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": KEY, "name": "importer", "users": "*"}]}))
    settings = Settings(
        listen="127.0.0.1:0",
        data_dir=tmp_path / "data",
        auth_keys_file=str(keys),
        max_concurrent_rpcs=1,
        max_concurrent_rpcs_per_key=0,  # the server's cap is what this proves
        max_concurrent_rpcs_per_tenant=0,
    )
    recorder = Recorder()
    running = await start_server(settings, App(settings, embedder=HashingEmbedder()),
                                 observer=recorder)  # fmt: skip
    channel = open_channel(f"127.0.0.1:{running.port}", retry=None)
    stub = memory_grpc.MemoryServiceStub(channel)
    session = await stub.CreateSession(memory_pb2.CreateSessionRequest(), metadata=bearer(KEY))
    yield running, channel, stub, recorder, session.id, settings
    await channel.close()
    if not running.gate.closed:
        await running.stop(None)


def episodes_in(settings: Settings) -> int:
    with sqlite3.connect(settings.sqlite_path) as conn:
        return conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]


async def test_an_import_is_authenticated_capped_logged_and_counted(server, caplog):
    running, channel, stub, recorder, session_id, _ = server
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.ImportEpisodes(iter([item(session_id, 0)]))
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert (IMPORT, grpc.StatusCode.UNAUTHENTICATED) in recorder.calls

    caplog.set_level(logging.INFO, logger="nexus_grpc.access")
    call = stub.ImportEpisodes(metadata=bearer(KEY) + (("x-request-id", "imp-1"),), timeout=20)
    await call.write(item(session_id, 0))
    await wait_until(lambda: _true(running.gate.active == 1))
    # The open import holds the one concurrency slot, as a unary call would.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetServiceStatus(memory_pb2.GetServiceStatusRequest(), metadata=bearer(KEY))
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    await call.write(item(session_id, 1))
    await call.done_writing()
    answer = await call
    assert (answer.received, answer.created) == (2, 2)
    assert ("x-request-id", "imp-1") in tuple(await call.trailing_metadata())
    assert (IMPORT, grpc.StatusCode.OK) in recorder.calls
    assert any(r.getMessage().startswith(f"{IMPORT} OK") for r in caplog.records), (
        "no access log line for the import"
    )
    # The slot is free again.
    await stub.GetServiceStatus(memory_pb2.GetServiceStatusRequest(), metadata=bearer(KEY))


async def _true(value: bool) -> bool:
    return value


async def test_a_refused_import_is_read_to_its_end_so_the_client_gets_the_reason(server):
    """Refused at once, a client still writing could lose the race with the
    status, which grpc's Python client then reports as INTERNAL "Internal error
    from Core"; the refusal waits for the stream's end (within bounds)."""
    _, _, stub, recorder, session_id, _ = server
    call = stub.ImportEpisodes(timeout=20)  # no key
    for i in range(3):
        await call.write(item(session_id, i))
    assert not call.done()  # still reading what the client sends
    await call.done_writing()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "missing API key" in err.value.details()
    assert (IMPORT, grpc.StatusCode.UNAUTHENTICATED) in recorder.calls


async def test_an_import_cut_off_by_its_deadline_writes_no_partial_batch(server):
    running, channel, stub, recorder, session_id, settings = server
    call = stub.ImportEpisodes(metadata=bearer(KEY), timeout=0.5)
    await call.write(item(session_id, 0))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # The server ended the call too, and its one unfinished batch was never written.
    await wait_until(lambda: _true(running.gate.active == 0))
    assert episodes_in(settings) == 0
    done = await stub.ImportEpisodes(iter([item(session_id, 0)]), metadata=bearer(KEY))
    assert done.created == 1


async def test_shutdown_refuses_new_calls_and_lets_a_running_import_finish(server):
    running, channel, stub, recorder, session_id, settings = server
    call = stub.ImportEpisodes(metadata=bearer(KEY), timeout=60)
    await call.write(item(session_id, 0))
    await wait_until(lambda: _true(running.gate.active == 1))
    # A grace period far longer than the test needs: on a loaded host the steps below
    # took long enough that a 10 s grace ran out and the import was cancelled with it.
    stopping = asyncio.create_task(running.stop(45))
    await wait_until(lambda: _true(running.gate.closed))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.ImportEpisodes(iter([item(session_id, 5)]), metadata=bearer(KEY))
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    # The import that was running when shutdown began gets its real answer.
    await call.write(item(session_id, 1))
    await call.done_writing()
    answer = await call
    assert (answer.received, answer.created, answer.failed) == (2, 2, 0)
    await stopping
    assert episodes_in(settings) == 2
