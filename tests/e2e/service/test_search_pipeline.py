"""The retrieval pipeline through a real server: filters run before the page
is cut (retention, a time window), and a path down is said on every hit of
every kind.

Its stages on plain values (hydration, fusion and the keyword lead against
``ranking``'s functions), every kind's stages declared in one place and
production code not knowing the stand-ins are tested in
tests/unit/test_search_pipeline_stages.py."""

from __future__ import annotations

import time

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.store import jobs
from tests.support import wait_until

DAY = 86_400
MODES = [
    memory_pb2.SEARCH_MODE_KEYWORD,
    memory_pb2.SEARCH_MODE_SEMANTIC,
    memory_pb2.SEARCH_MODE_HYBRID,
]


def ts(seconds: float) -> Timestamp:
    t = Timestamp()
    t.FromNanoseconds(int(seconds * 1e9))
    return t


async def indexed(h) -> None:
    async def done():
        return not await h.app.db.read_sql(
            lambda c: c.execute(
                "SELECT COUNT(*) FROM jobs WHERE kind = 'index:episodes'"
            ).fetchone()[0]
        )

    await wait_until(done, timeout=20)


async def episodes_at(h, session_id: int, texts_and_times) -> dict[int, str]:
    names = {}
    for text, when in texts_and_times:
        ep = await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session_id, user_message=text, ai_response="noted", occur_time=ts(when)
            )
        )
        names[ep.id] = text
    return names


@pytest.mark.parametrize("mode", MODES)
async def test_hits_past_retention_never_leave_a_page_short(harness, mode):
    """Old exchanges match the query best; the page is still ``limit`` retained
    ones, because retention is a filter inside the search, not after it."""
    h = harness
    for worker in h.app.workers:  # the sweep would delete the old ones: keep them
        if worker.kind == jobs.RETAIN_PROJECT:
            await worker.stop()
    now = time.time()
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    old = await episodes_at(
        h, session.id, [(f"zebra zebra zebra stripes {i}", now - 5 * DAY) for i in range(15)]
    )
    recent = await episodes_at(
        h, session.id, [(f"a zebra seen at the park, visit {i}", now - 60) for i in range(12)]
    )
    await indexed(h)
    request = memory_pb2.SearchEpisodesRequest(
        query="zebra stripes", session_id=session.id, mode=mode, limit=10
    )
    before = [x.episode.id async for x in h.memory.SearchEpisodes(request)]
    assert len(before) == 10 and set(before) & set(old)  # the positive case: old ones rank
    await h.memory.UpdateProject(
        memory_pb2.UpdateProjectRequest(
            project=memory_pb2.Project(id=project.id, retention=Duration(seconds=2 * DAY)),
            update_mask=FieldMask(paths=["retention"]),
        )
    )
    for scoped in (
        request,
        memory_pb2.SearchEpisodesRequest(
            query="zebra stripes", project_id=project.id, mode=mode, limit=10
        ),
    ):
        after = [x.episode.id async for x in h.memory.SearchEpisodes(scoped)]
        assert len(after) == 10, after
        assert set(after) <= set(recent)


@pytest.mark.parametrize("mode", MODES)
async def test_hits_outside_the_window_never_leave_a_page_short(harness, mode):
    h = harness
    now = time.time()
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
    )
    await episodes_at(
        h, session.id, [(f"falcon falcon falcon nest {i}", now - 9 * DAY) for i in range(15)]
    )
    inside = await episodes_at(
        h, session.id, [(f"a falcon over the river, {i}", now - 2 * DAY) for i in range(12)]
    )
    await indexed(h)
    hits = [
        x.episode.id
        async for x in h.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(
                query="falcon nest",
                session_id=session.id,
                mode=mode,
                limit=10,
                start_time=ts(now - 3 * DAY),
                end_time=ts(now),
            )
        )
    ]
    assert len(hits) == 10 and set(hits) <= set(inside)


async def test_a_path_down_is_said_on_every_hit_of_every_kind(tmp_path):
    from nexus_grpc.embedding import EmbedderUnavailable
    from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
    from tests.support import HashingEmbedder, start_harness

    embedder = HashingEmbedder()
    h = await start_harness(tmp_path / "data", embedder=embedder)
    try:
        project = await h.memory.CreateProject(
            memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
        )
        session = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
        )
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message="postgres lag")
        )
        await h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name="Postgres", type="technology", project_id=project.id)
        )

        async def everything_indexed():
            return not await h.app.db.read_sql(
                lambda c: c.execute(
                    "SELECT COUNT(*) FROM jobs WHERE kind LIKE 'index:%'"
                ).fetchone()[0]
            )

        await wait_until(everything_indexed, timeout=20)
        whole = [
            x
            async for x in h.memory.SearchEpisodes(
                memory_pb2.SearchEpisodesRequest(query="postgres", session_id=session.id)
            )
        ]
        assert whole and not whole[0].degraded_reason  # the positive case first
        embedder.fail_with = EmbedderUnavailable("embedding server is down")
        # New questions: one asked before has its vector remembered (--query-vector-cache).
        episodes = [
            x
            async for x in h.memory.SearchEpisodes(
                memory_pb2.SearchEpisodesRequest(query="postgres lag", session_id=session.id)
            )
        ]
        assert episodes and all(
            "semantic search is unavailable: embedding server is down" in x.degraded_reason
            for x in episodes
        )
        entities = [
            x
            async for x in h.graph.SearchEntities(
                graph_pb2.SearchEntitiesRequest(query="about postgres", project_id=project.id)
            )
        ]
        assert [x.entity.name for x in entities] == ["Postgres"]
        assert "entity search is unavailable" in entities[0].degraded_reason
    finally:
        await h.close()
