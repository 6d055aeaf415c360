"""The concurrent-RPC cap: calls past it are refused, counted and logged.

Here, the caps over real streams and a start refused for its limits (the
wiring); each cap's decision and its message and details, and every limit
the start refuses, are tested on the interceptor and server.check_limits
directly in tests/unit/test_limits_rules.py.
"""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.app import App, StartupError
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.rpc.requests import RequestObserver
from nexus_grpc.runtime.config import Settings
from nexus_grpc.server import start_server
from tests.support import HashingEmbedder, bearer, start_harness, wait_until

# On SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True


class Recorder(RequestObserver):
    def __init__(self) -> None:
        self.codes: list[tuple[str, grpc.StatusCode]] = []
        self.stream_open = asyncio.Event()
        self.refused = asyncio.Event()

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        self.codes.append((method, code))
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            self.refused.set()

    def stream_started(self, method: str) -> None:
        self.stream_open.set()


async def test_calls_past_the_cap_are_resource_exhausted_and_counted(tmp_path, store_settings):
    settings = Settings(
        listen="127.0.0.1:0", data_dir=tmp_path / "d", max_concurrent_rpcs=1, **store_settings
    )
    recorder = Recorder()
    running = await start_server(
        settings, App(settings, embedder=HashingEmbedder()), observer=recorder
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        watch = graph_grpc.GraphServiceStub(channel).WatchExtractions(
            graph_pb2.WatchExtractionsRequest()
        )
        reader = asyncio.ensure_future(watch.read())
        await recorder.stream_open.wait()  # the open stream holds the only slot
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await memory_grpc.MemoryServiceStub(channel).ListProjects(
                memory_pb2.ListProjectsRequest()
            )
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "limit" in refused.value.details()
        # The server records the call once its status is sent, which may be just
        # after the client has it.
        await asyncio.wait_for(recorder.refused.wait(), 10)
        assert (
            "/nexus.memory.v1.MemoryService/ListProjects",
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        ) in recorder.codes
        # Health stays answerable when the server is saturated.
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        reader.cancel()
    finally:
        await channel.close()
        await running.stop(None)


KEY_A = "limits-key-a-000000000001"
KEY_B = "limits-key-b-000000000001"
PER_KEY = 3


@pytest.fixture
async def keyed(tmp_path, store_settings):
    """Two keys; each may run PER_KEY calls, the server 8."""
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": KEY_A, "name": "a", "users": "*"},
                    # Another tenant's key: only the per-key limit separates them.
                    {"key": KEY_B, "name": "b", "users": "*"},
                ]
            }
        )
    )
    h = await start_harness(
        tmp_path / "data",
        auth_keys_file=str(keys),
        max_concurrent_rpcs=8,
        max_concurrent_rpcs_per_key=PER_KEY,
        **store_settings,
    )
    yield h
    await h.close()


async def test_one_key_at_its_limit_leaves_the_server_to_the_others(keyed):
    """The probe's 515 idle ImportEpisodes streams from one key, in small: a
    key holding its limit of idle client streams is refused a further call,
    while another key's unary and streaming calls go through."""
    h = keyed
    a, b = bearer(KEY_A), bearer(KEY_B)
    idle = [h.memory.ImportEpisodes(metadata=a) for _ in range(PER_KEY)]

    async def refused_to_a() -> grpc.aio.AioRpcError | None:
        try:
            await h.memory.ListProjects(memory_pb2.ListProjectsRequest(), metadata=a)
        except grpc.aio.AioRpcError as exc:
            return exc
        return None

    async def held_at_its_limit() -> grpc.aio.AioRpcError | None:
        # A stream that arrived while a probe below held a slot was refused:
        # open it again, until the key's three slots are the streams'.
        for i, call in enumerate(idle):
            if call.done():
                idle[i] = h.memory.ImportEpisodes(metadata=a)
        return await refused_to_a()

    # The streams hold their slots from the moment the server starts them.
    refusal = await wait_until(held_at_its_limit)
    assert refusal.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    for text in ("API key 'a' already has 3 calls running", "--max-concurrent-rpcs-per-key",
                 "(now 3)"):  # fmt: skip
        assert text in refusal.details()
    # A streamed call of the same key is refused the same way.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.ImportEpisodes(iter(()), metadata=a)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # The other key: unary, a server stream and a client stream all succeed,
    # as many at once as its own limit.
    session = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(), metadata=b)
    listed = await asyncio.gather(
        *(h.memory.ListSessions(memory_pb2.ListSessionsRequest(), metadata=b)
          for _ in range(PER_KEY))
    )  # fmt: skip
    assert all([s.id for s in page.sessions] == [session.id] for page in listed)
    hits = [
        hit
        async for hit in h.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(query="x", session_id=session.id), metadata=b
        )
    ]
    assert hits == []
    imported = await h.memory.ImportEpisodes(
        iter(
            [
                memory_pb2.ImportEpisodesRequest(
                    episode=memory_pb2.CreateEpisodeRequest(
                        session_id=session.id, user_message="hello", request_id="b-1"
                    )
                )
            ]
        ),
        metadata=b,
    )
    assert imported.created == 1
    # A slot the key frees is its own again.
    idle.pop().cancel()

    async def a_served() -> bool:
        return await refused_to_a() is None

    await wait_until(a_served)
    for call in idle:
        call.cancel()


async def test_a_per_key_limit_not_below_the_servers_stops_the_start(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": KEY_A, "name": "a", "users": "*"}]}))
    settings = Settings(
        listen="127.0.0.1:0",
        data_dir=tmp_path / "d",
        auth_keys_file=str(keys),
        max_concurrent_rpcs=16,
        max_concurrent_rpcs_per_key=16,
    )
    with pytest.raises(StartupError) as err:
        await start_server(settings, App(settings, embedder=HashingEmbedder()))
    assert "--max-concurrent-rpcs-per-key (16) must be below --max-concurrent-rpcs (16)" in str(
        err.value
    )


TENANT_B_KEYS = ("limits-tenant-b-key-0001", "limits-tenant-b-key-0002", "limits-tenant-b-key-0003")
TENANT_A_KEY = "limits-tenant-a-key-0001"


@pytest.fixture
async def tenants(tmp_path, store_settings):
    """Tenant B with three keys, tenant A with one: each key may run PER_KEY
    calls (3), the server 8, so a tenant at most half of that (the default)."""
    keys = tmp_path / "keys.json"
    entries = [{"key": k, "name": f"b{i}", "users": "*", "tenant": "tb"}
               for i, k in enumerate(TENANT_B_KEYS)]  # fmt: skip
    entries.append({"key": TENANT_A_KEY, "name": "a", "users": "*", "tenant": "ta"})
    keys.write_text(json.dumps({"keys": entries}))
    h = await start_harness(
        tmp_path / "data",
        auth_keys_file=str(keys),
        max_concurrent_rpcs=8,
        max_concurrent_rpcs_per_key=PER_KEY,
        max_watch_streams=4,
        **store_settings,
    )
    yield h
    await h.close()


async def test_one_tenants_keys_together_leave_the_server_to_other_tenants(tenants):
    """The fourth probe: four keys of one tenant, each at its own limit, filled
    the server. Here tenant B's three keys try to hold 9 idle streams, more
    than the server's 8: the tenant holds 4 (half the server's), the rest are
    refused naming the tenant's limit, and tenant A is served."""
    h = tenants
    b_keys = [bearer(k) for k in TENANT_B_KEYS]
    idle = [h.memory.ImportEpisodes(metadata=b) for b in b_keys for _ in range(PER_KEY)]

    async def tenant_b_full() -> grpc.aio.AioRpcError | None:
        # A stream that arrived while a probe below held one of the tenant's
        # slots was refused: open it again, until the tenant's four slots are
        # the streams' (else a probe can find the tenant below its limit
        # forever).
        for i, call in enumerate(idle):
            if call.done():
                idle[i] = h.memory.ImportEpisodes(metadata=b_keys[i // PER_KEY])
        # One of B's keys may be at its own limit (refused for that): the
        # others are below theirs, and refused for the tenant's.
        for b in b_keys:
            try:
                await h.memory.ListProjects(memory_pb2.ListProjectsRequest(), metadata=b)
            except grpc.aio.AioRpcError as exc:
                if "tenant" in (exc.details() or ""):
                    return exc
        return None

    refusal = await wait_until(tenant_b_full, timeout=30)
    assert refusal.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    for text in ("the keys of tenant 'tb' already have 4 calls running together",
                 "--max-concurrent-rpcs-per-tenant", "(now 4)"):  # fmt: skip
        assert text in refusal.details()
    # Tenant A: as many calls at once as its own key may run, all served.
    a = bearer(TENANT_A_KEY)
    session = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(), metadata=a)
    listed = await asyncio.gather(
        *(h.memory.ListSessions(memory_pb2.ListSessionsRequest(), metadata=a)
          for _ in range(PER_KEY))
    )  # fmt: skip
    assert all([s.id for s in page.sessions] == [session.id] for page in listed)
    # The tenant's slots come back as its streams end.
    for call in idle:
        call.cancel()

    async def b_served() -> bool:
        try:
            await h.memory.ListProjects(memory_pb2.ListProjectsRequest(), metadata=b_keys[0])
        except grpc.aio.AioRpcError:
            return False
        return True

    await wait_until(b_served, timeout=30)


async def test_one_tenants_watch_streams_leave_room_for_other_tenants(tenants):
    """--max-watch-streams 4: a tenant holds at most 2 (half), whatever its keys."""
    from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2

    h = tenants
    b_keys = [bearer(k) for k in TENANT_B_KEYS]
    session = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(), metadata=b_keys[0])
    ask = graph_pb2.WatchExtractionsRequest(session_id=session.id)
    held = [h.graph.WatchExtractions(ask, metadata=b) for b in b_keys[:2]]

    async def both_open() -> bool:
        return h.app.graph_events.watchers == 2

    await wait_until(both_open)
    third = h.graph.WatchExtractions(ask, metadata=b_keys[2])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await third.read()
    refusal = err.value
    assert refusal.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "tenant 'tb'" in refusal.details() and "--max-watch-streams-per-tenant" in (
        refusal.details()
    )
    a = bearer(TENANT_A_KEY)
    theirs = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(), metadata=a)
    mine = h.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(session_id=theirs.id), metadata=a
    )

    async def three_open() -> bool:
        return h.app.graph_events.watchers == 3

    # Tenant A's stream is admitted beside B's two: open, nothing to hear.
    await wait_until(three_open)
    assert not mine.done()
    for call in [*held, mine]:
        call.cancel()
