"""On PostgreSQL with pgvector, a new row's vector is written in the row's own
transaction (domain/inline_vectors.py): searchable by meaning the moment the
create returns, with no index job. When the embedder cannot answer, the create
still succeeds and the row converges through its durable index job."""

from __future__ import annotations

import json

import pytest

from nexus_grpc.embedding import EmbedderUnavailable
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.store import jobs
from tests.support import HashingEmbedder, start_harness, wait_until

DONE = memory_pb2.JOB_STATE_DONE


class FlakyEmbedder(HashingEmbedder):
    """Down for the next ``failures`` calls, then back."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0

    async def embed(self, texts):
        if self.failures > 0:
            self.failures -= 1
            self.calls += 1
            raise EmbedderUnavailable("connection refused (the test's outage)")
        return await super().embed(texts)


@pytest.fixture
async def pg(tmp_path, pg_url):
    embedder = FlakyEmbedder()
    h = await start_harness(tmp_path / "data", embedder=embedder, database_url=pg_url)
    yield h, embedder
    await h.close()


async def _point(h, collection: str, row_id: int):
    row = await h.app.db.read_sql(
        lambda c: c.execute(
            f"SELECT payload FROM vectors_{collection} WHERE id = ?", (row_id,)
        ).fetchone()
    )
    return None if row is None else (row[0] if isinstance(row[0], dict) else json.loads(row[0]))


async def _jobs_for(h, kind: str, target: int) -> list[str]:
    rows = await h.app.db.read_sql(
        lambda c: c.execute(
            "SELECT state FROM jobs WHERE kind = ? AND target_id = ?", (kind, target)
        ).fetchall()
    )
    return [r[0] for r in rows]


async def _stop_index_workers(h) -> None:
    for worker in h.app.workers:
        if worker.kind.startswith("index:"):
            await worker.stop()


async def test_a_created_episode_is_in_pgvector_when_the_call_returns(pg):
    h, _ = pg
    assert h.app.inline_vectors is not None
    # No index worker runs: whatever is in pgvector, the create itself put there.
    await _stop_index_workers(h)
    s = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(session=memory_pb2.Session()))
    ep = await h.memory.CreateEpisode(memory_pb2.CreateEpisodeRequest(
        session_id=s.id, user_message="the lighthouse keeper paints boats",
        ai_response="blue ones"))  # fmt: skip
    assert ep.embedding_state == DONE
    payload = await _point(h, "episodes", ep.id)
    assert payload is not None and payload["sessionId"] == s.id
    assert await _jobs_for(h, jobs.INDEX_EPISODE, ep.id) == []
    # The pgvector index reads what the row's transaction wrote: semantic search finds it.
    hits = [
        hit async for hit in h.memory.SearchEpisodes(memory_pb2.SearchEpisodesRequest(
            query="lighthouse keeper boats", session_id=s.id, mode=memory_pb2.SEARCH_MODE_SEMANTIC))
    ]  # fmt: skip
    assert [hit.episode.id for hit in hits] == [ep.id]
    got = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ep.id))
    assert got.embedding_state == DONE

    # A memory and a new entity too.
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    memory = await h.memory.CreateMemory(memory_pb2.CreateMemoryRequest(memory=memory_pb2.Memory(
        kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=project.id, title="deploys",
        content="friday deploys are frozen", tier=memory_pb2.TIER_LONGTERM)))  # fmt: skip
    assert (await _point(h, "memories", memory.id))["projectId"] == project.id
    assert await _jobs_for(h, jobs.INDEX_MEMORY, memory.id) == []
    entity = await h.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="Atlas", type="project", project_id=project.id)
    )
    assert (await _point(h, "entities", entity.id))["projectId"] == project.id
    assert await _jobs_for(h, jobs.INDEX_ENTITY, entity.id) == []
    # An existing entity's change goes through its job (its text may change
    # under a running one): the job path is kept for updates.
    await h.graph.UpsertEntity(graph_pb2.UpsertEntityRequest(
        name="Atlas", type="project", project_id=project.id, notes="the rewrite"))  # fmt: skip
    assert await _jobs_for(h, jobs.INDEX_ENTITY, entity.id) == ["pending"]


async def test_a_change_or_a_delete_takes_the_stale_point_out_in_its_own_transaction(pg):
    h, _ = pg
    # No index worker runs: whatever leaves pgvector, the write itself took out.
    await _stop_index_workers(h)
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    memory = await h.memory.CreateMemory(memory_pb2.CreateMemoryRequest(memory=memory_pb2.Memory(
        kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=project.id, title="deploys",
        content="friday deploys are frozen", tier=memory_pb2.TIER_LONGTERM)))  # fmt: skip
    kept = await h.memory.CreateMemory(memory_pb2.CreateMemoryRequest(memory=memory_pb2.Memory(
        kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=project.id, title="coffee",
        content="the team drinks tea", tier=memory_pb2.TIER_LONGTERM)))  # fmt: skip
    assert await _point(h, "memories", memory.id) is not None

    # A change to what the vector was made from: the old point is gone when the
    # call returns (never a point that disagrees with its row); its job re-embeds.
    await h.memory.UpdateMemory(memory_pb2.UpdateMemoryRequest(
        memory=memory_pb2.Memory(id=memory.id, content="deploys run any day now"),
        update_mask={"paths": ["content"]}))  # fmt: skip
    assert await _point(h, "memories", memory.id) is None
    assert await _jobs_for(h, jobs.INDEX_MEMORY, memory.id) == ["pending"]
    # Only the changed row's point goes.
    assert await _point(h, "memories", kept.id) is not None
    session = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(
        session=memory_pb2.Session(project_id=project.id)))  # fmt: skip

    # Deletes, direct and by cascade.
    await h.memory.DeleteMemory(memory_pb2.DeleteMemoryRequest(id=kept.id))
    assert await _point(h, "memories", kept.id) is None
    episode = await h.memory.CreateEpisode(memory_pb2.CreateEpisodeRequest(
        session_id=session.id, user_message="the harbour freezes in january",
        ai_response="boats stay in"))  # fmt: skip
    assert await _point(h, "episodes", episode.id) is not None
    await h.memory.DeleteSession(memory_pb2.DeleteSessionRequest(id=session.id))
    assert await _point(h, "episodes", episode.id) is None

    # The index worker puts the changed memory's new point back.
    for worker in h.app.workers:
        if worker.kind == jobs.INDEX_MEMORY:
            worker.start()

    async def re_embedded():
        return await _point(h, "memories", memory.id) is not None

    await wait_until(re_embedded)


async def test_with_the_embedder_down_a_create_converges_through_its_job(pg):
    h, embedder = pg
    s = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(session=memory_pb2.Session()))
    embedder.failures = 1  # the create's own embedding fails; the worker's succeeds
    ep = await h.memory.CreateEpisode(memory_pb2.CreateEpisodeRequest(
        session_id=s.id, user_message="orchids need indirect light"))  # fmt: skip
    assert ep.embedding_state != DONE
    assert h.app.inline_vectors.fallbacks == 1

    async def embedded():
        got = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ep.id))
        return got.embedding_state == DONE and await _point(h, "episodes", ep.id) is not None

    await wait_until(embedded)
    # While the inline path rests after the failure, creates take the job path
    # at once, without asking the embedder.
    calls = embedder.calls
    second = await h.memory.CreateEpisode(memory_pb2.CreateEpisodeRequest(
        session_id=s.id, user_message="ferns like shade"))  # fmt: skip
    assert h.app.inline_vectors.fallbacks == 2
    assert embedder.calls <= calls + 1  # at most the worker's own call

    async def second_embedded():
        # The worker writes the point, then records its job done: wait for both.
        return (
            await _point(h, "episodes", second.id) is not None
            and await _jobs_for(h, jobs.INDEX_EPISODE, second.id) == []
        )

    await wait_until(second_embedded)
    assert await _jobs_for(h, jobs.INDEX_EPISODE, second.id) == []


async def test_a_missing_vector_table_sends_the_row_to_its_job(pg, caplog):
    h, _ = pg
    # A vector index whose table is gone (dropped by hand): the create's write
    # is refused by PostgreSQL, runs again without the vector, and the index
    # worker re-creates the table and embeds the row.
    await h.app.db.write_sql(lambda c: c.execute("DROP TABLE vectors_memories"))
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    memory = await h.memory.CreateMemory(memory_pb2.CreateMemoryRequest(memory=memory_pb2.Memory(
        kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=project.id, title="t", content="c",
        tier=memory_pb2.TIER_LONGTERM)))  # fmt: skip

    async def embedded():
        try:
            return await _point(h, "memories", memory.id) is not None
        except Exception:
            return False

    await wait_until(embedded)
    assert "vectors_memories" in caplog.text and "goes through its index job" in caplog.text


async def test_sqlite_and_qdrant_keep_the_job_path(tmp_path):
    h = await start_harness(tmp_path / "data")
    try:
        assert h.app.inline_vectors is None
        assert h.app.conversations.inline is None
    finally:
        await h.close()
