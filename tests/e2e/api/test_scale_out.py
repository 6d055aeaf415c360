"""Several servers on one PostgreSQL database behave as one service.

Each test starts real servers (real gRPC channels, real PostgreSQL from
tests/pg.py, pgvector beside it) on one database and proves one promise of
docs/scale-out.md across them: a retry sent to two instances is one episode,
an extraction finished on one instance reaches a watcher on another, and
every instance reads what any other wrote.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.store import jobs
from tests.graph_support import ALICE, start_graph_harness
from tests.support import start_harness, take, wait_until

STUB_DEFAULT_REPLY = ALICE


@pytest.fixture
async def pair(tmp_path, pg_url):
    """Two instances on one database, each with its own data directory."""
    a = await start_harness(tmp_path / "a", database_url=pg_url)
    b = await start_harness(tmp_path / "b", database_url=pg_url)
    yield a, b
    await a.close()
    await b.close()


async def test_a_retry_sent_to_two_instances_is_one_episode(pair):
    a, b = pair
    session = await a.memory.CreateSession(memory_pb2.CreateSessionRequest())
    for n in range(5):
        request = memory_pb2.CreateEpisodeRequest(
            session_id=session.id, user_message=f"question {n}", request_id=f"retry-{n}"
        )
        replies = await asyncio.gather(
            a.memory.CreateEpisode(request), b.memory.CreateEpisode(request),
            b.memory.CreateEpisode(request), a.memory.CreateEpisode(request),
        )  # fmt: skip
        assert len({r.id for r in replies}) == 1
    listed = await b.memory.ListEpisodes(
        memory_pb2.ListEpisodesRequest(session_id=session.id, page_size=50)
    )
    assert len(listed.episodes) == 5
    # A different call under a used request_id is refused on the other instance too.
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await b.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id, user_message="other", request_id="retry-0"
            )
        )
    assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS


async def test_every_instance_reads_and_searches_what_another_wrote(pair):
    a, b = pair
    project = await a.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    session = await b.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    episode = await a.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=session.id, user_message="postgres replication lag", ai_response="ok"
        )
    )
    assert (await b.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=episode.id))).id == episode.id

    async def search(h, mode):
        request = memory_pb2.SearchEpisodesRequest(
            query="replication", project_id=project.id, mode=mode
        )
        return [hit.episode.id async for hit in h.memory.SearchEpisodes(request)]

    # Keyword search reads the row's own tsvector: at once, from either instance.
    assert await search(b, memory_pb2.SEARCH_MODE_KEYWORD) == [episode.id]

    # Semantic search once either instance's index worker has embedded it.
    async def embedded():
        n = await a.app.db.read_sql(
            lambda c: c.execute(
                "SELECT COUNT(*) FROM jobs WHERE kind = ?", (jobs.INDEX_EPISODE,)
            ).fetchone()[0]
        )
        return n == 0

    await wait_until(embedded)
    assert await search(b, memory_pb2.SEARCH_MODE_SEMANTIC) == [episode.id]
    assert await search(a, memory_pb2.SEARCH_MODE_HYBRID) == [episode.id]


async def test_an_extraction_on_one_instance_reaches_a_watcher_on_another(
    tmp_path, pg_url, stub
):
    # Instance a extracts (it has the LLM); instance b has none, so its own
    # extraction worker waits: whatever b's watcher hears, a extracted.
    a = await start_graph_harness(tmp_path / "a", stub, database_url=pg_url)
    b = await start_harness(tmp_path / "b", database_url=pg_url)
    try:
        session = await b.memory.CreateSession(memory_pb2.CreateSessionRequest())
        call = b.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(session_id=session.id))
        episode = await b.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message="Alice leads Atlas")
        )
        [event] = await take(call, 1, limit=20.0)
        call.cancel()
        assert event.episode_id == episode.id
        assert event.status == graph_pb2.EXTRACTION_STATUS_DONE
        assert {e.name for e in event.entities} == {"Alice", "Atlas"}
        assert stub.requests_to("/api/chat"), "instance a's LLM did the extraction"
        # The graph a wrote is b's to read.
        found = await b.graph.ListEntities(graph_pb2.ListEntitiesRequest(session_id=session.id))
        assert {e.name for e in found.entities} == {"Alice", "Atlas"}
    finally:
        await a.close()
        await b.close()


async def test_a_round_robin_client_spreads_calls_over_the_instances(pair):
    """docs/scale-out.md's load balancing without a proxy: one channel to every
    instance's address with gRPC's round_robin policy (what DNS round robin
    gives a client through a name with one A record per instance)."""
    from nexus_grpc.client.connection import open_channel
    from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc

    a, b = pair
    # Only the calls commit now: the background workers (which commit their
    # own claims), the upkeep loops and the start-up tasks (a reconcile, budgets
    # resumed: late on a loaded machine) are stopped or done, so each
    # instance's commit count is its share.
    for worker in [*a.app.workers, *b.app.workers]:
        await worker.stop()
    for h in pair:
        if h.app.keyword_upkeep is not None:
            await h.app.keyword_upkeep.stop()
        await h.app.storage_upkeep.stop()
        await asyncio.gather(*h.app._background)
    addresses = ",".join(h.target for h in pair)
    channel = open_channel(f"ipv4:{addresses}", options=[("grpc.lb_policy_name", "round_robin")])
    try:
        stub = memory_grpc.MemoryServiceStub(channel)
        # Round robin starts on the first address that connects: let both connect.
        for _ in range(4):
            await stub.ListProjects(
                memory_pb2.ListProjectsRequest(page_size=1), wait_for_ready=True
            )
        before = (a.app.db.commits, b.app.db.commits)
        created = [await stub.CreateSession(memory_pb2.CreateSessionRequest()) for _ in range(10)]
    finally:
        await channel.close()
    assert len({s.id for s in created}) == 10
    # Round robin alternates the instances: each committed its share of the ten.
    shares = (a.app.db.commits - before[0], b.app.db.commits - before[1])
    assert sum(shares) == 10 and min(shares) >= 3, shares


def _allow_connections(url: str, allowed: bool) -> None:
    """One instance's database refuses connections (and cuts those it had), as
    a database that went away or a partition from it would; or takes them again."""
    import psycopg

    from tests import pg

    name = pg.database_name(url)
    with psycopg.connect(pg.server().get_uri(), autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS {str(allowed).lower()}")
        if not allowed:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )


async def test_a_round_robin_client_moves_off_an_instance_that_is_not_serving(tmp_path):
    """The client's service config turns on client-side health checking, so a
    round-robin channel sends nothing to an instance whose health turned
    NOT_SERVING (its database is away) and comes back to it once it says
    SERVING. The same channel without health checking keeps sending there."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from nexus_grpc.client.connection import open_channel
    from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
    from tests import pg

    urls = [pg.new_database(), pg.new_database()]
    # Two instances, each with its own database: only one of them goes down.
    a = await start_harness(tmp_path / "a", database_url=urls[0])
    b = await start_harness(tmp_path / "b", database_url=urls[1])
    addresses = f"ipv4:{a.target},{b.target}"
    rr = [("grpc.lb_policy_name", "round_robin")]
    checked = open_channel(addresses, retry=None, options=rr)
    # The control: health checking left out of the service config.
    unchecked = open_channel(addresses, retry=None, options=[*rr, ("grpc.service_config", "{}")])
    a_health = health_pb2_grpc.HealthStub(a.channel).Watch(health_pb2.HealthCheckRequest())

    async def a_says(status: int) -> None:
        while (await asyncio.wait_for(a_health.read(), 30)).status != status:
            pass

    async def sessions(h) -> int:
        return await h.app.db.read_sql(
            lambda c: int(c.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])
        )

    async def create_all(channel, n: int) -> list[grpc.StatusCode]:
        stub = memory_grpc.MemoryServiceStub(channel)
        codes = []
        for _ in range(n):
            try:
                await stub.CreateSession(memory_pb2.CreateSessionRequest())
                codes.append(grpc.StatusCode.OK)
            except grpc.aio.AioRpcError as exc:
                codes.append(exc.code())
        return codes

    try:
        await a_says(health_pb2.HealthCheckResponse.SERVING)
        for channel in (checked, unchecked):
            # Round robin starts on the first address that connects: let both connect.
            stub = memory_grpc.MemoryServiceStub(channel)
            for _ in range(4):
                await stub.ListProjects(memory_pb2.ListProjectsRequest(), wait_for_ready=True)
        assert await create_all(checked, 6) == [grpc.StatusCode.OK] * 6
        assert min(await sessions(a), await sessions(b)) >= 2, "spread over both"

        _allow_connections(urls[0], False)
        await a_says(health_pb2.HealthCheckResponse.NOT_SERVING)
        # The client's own health watch on A hears it too (at once, or a
        # moment after the one above): from then on every call goes to B.
        await wait_until(lambda: _all_ok(create_all(checked, 4)), timeout=20)
        on_b = await sessions(b)
        assert await create_all(checked, 20) == [grpc.StatusCode.OK] * 20
        assert await sessions(b) == on_b + 20
        # Without health checking, round robin goes on sending A its share.
        assert grpc.StatusCode.UNAVAILABLE in await create_all(unchecked, 6)

        _allow_connections(urls[0], True)
        await a_says(health_pb2.HealthCheckResponse.SERVING)
        on_a = await sessions(a)

        async def back_on_a() -> bool:
            assert await _all_ok(create_all(checked, 4))
            return await sessions(a) > on_a

        await wait_until(back_on_a, timeout=20)
    finally:
        a_health.cancel()
        await checked.close()
        await unchecked.close()
        await a.close()
        await b.close()
        _allow_connections(urls[0], True)
        for url in urls:
            pg.drop_database(url)


async def _all_ok(codes) -> bool:
    return set(await codes) == {grpc.StatusCode.OK}
