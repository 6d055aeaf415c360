"""The durable embedding pipeline: real embedder, index downtime, model mismatch, reconcile.

Each test runs on SQLite and on PostgreSQL (tests/conftest.py); on PostgreSQL the
vectors are pgvector tables in the same database, except where a test brings its
own index (a Qdrant one).
"""

from __future__ import annotations

import socket

import pytest

from nexus_grpc.app import App, EmbedderMismatch
from nexus_grpc.embedding import MiniLMEmbedder, make_embedder
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.runtime.config import Settings
from nexus_grpc.vectors import QdrantVectorIndex
from tests.support import HashingEmbedder, start_harness, wait_until

BOTH_STORES = True


async def jobs_left(h, kind="index:episodes") -> int:
    return await h.app.db.read_sql(
        lambda c: c.execute(
            "SELECT COUNT(*) FROM jobs WHERE kind = ? AND state != 'failed'", (kind,)
        ).fetchone()[0]
    )


async def test_paraphrase_is_found_semantically_with_the_real_offline_model(
    tmp_path, store_settings
):
    h = await start_harness(tmp_path / "d", embedder=MiniLMEmbedder(threads=1), **store_settings)
    try:
        s = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
        )
        for text in [
            "I forgot my login credentials and need to change them",
            "What is a good recipe for banana bread?",
            "The quarterly revenue grew by twelve percent",
        ]:
            await h.memory.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(session_id=s.id, user_message=text)
            )
        await wait_until(lambda: _zero(h))
        query = "password reset"
        keyword = [
            x
            async for x in h.memory.SearchEpisodes(
                memory_pb2.SearchEpisodesRequest(
                    query=query, session_id=s.id, mode=memory_pb2.SEARCH_MODE_KEYWORD
                )
            )
        ]
        assert keyword == []  # no shared words: keywords cannot find it
        semantic = [
            x
            async for x in h.memory.SearchEpisodes(
                memory_pb2.SearchEpisodesRequest(
                    query=query, session_id=s.id, mode=memory_pb2.SEARCH_MODE_SEMANTIC
                )
            )
        ]
        assert semantic[0].episode.user_message.startswith("I forgot my login")
        ep = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=semantic[0].episode.id))
        assert ep.embedding_state == memory_pb2.JOB_STATE_DONE
    finally:
        await h.close()


async def _zero(h) -> bool:
    return await jobs_left(h) == 0


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_index_down_keeps_writes_succeeding_and_drains_when_it_returns(
    tmp_path, store_settings
):
    class FlakyIndex(QdrantVectorIndex):
        """Remote mode: real client against a closed port, then a working one."""

        def __init__(self):
            super().__init__(location=":memory:")
            self.down = QdrantVectorIndex(url=f"http://127.0.0.1:{closed_port()}", timeout=1)
            self.is_down = True

        async def upsert(self, collection, points):
            if self.is_down:
                return await self.down.upsert(collection, points)
            return await super().upsert(collection, points)

        async def check(self):
            return await self.down.check() if self.is_down else await super().check()

    index = FlakyIndex()
    h = await start_harness(tmp_path / "d", index=index, **store_settings)
    try:
        s = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
        )
        ids = []
        for i in range(5):
            ep = await h.memory.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(
                    session_id=s.id, user_message=f"written while the index is down {i}"
                )
            )
            ids.append(ep.id)

        async def attempted():
            row = await h.app.db.read_sql(
                lambda c: c.execute(
                    "SELECT COUNT(*) FROM jobs WHERE kind='index:episodes' AND last_error != ''"
                ).fetchone()[0]
            )
            return row > 0

        await wait_until(attempted)
        status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
        assert status.state == "DEGRADED"
        vector = next(d for d in status.dependencies if d.name == "vector_index")
        assert not vector.ok and vector.detail
        assert await jobs_left(h) == 5
        ep = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ids[0]))
        assert ep.embedding_state == memory_pb2.JOB_STATE_PENDING

        index.is_down = False
        h.app.signals.wake("index:episodes")
        # Postponed jobs run again after their delay; shorten it by waking the worker.
        await h.app.db.write_sql(lambda c: c.execute("UPDATE jobs SET run_after = 0"))
        h.app.signals.wake("index:episodes")
        await wait_until(lambda: _zero(h))
        assert await index.count("episodes") == 5
    finally:
        await h.close()
        await index.down.close()


async def test_embedder_mismatch_at_start_names_reindex(tmp_path, store_settings):
    h = await start_harness(tmp_path / "d", **store_settings)
    await h.close()

    class OtherEmbedder(HashingEmbedder):
        model_id = "some-other-model"

    app = App(Settings(data_dir=tmp_path / "d", **store_settings), embedder=OtherEmbedder())
    with pytest.raises(EmbedderMismatch, match="nexus-grpc reindex"):
        await app.start()
    await app.db.close()
    await app.index.close()


async def test_reconcile_restores_points_deleted_behind_the_services_back(tmp_path, store_settings):
    h = await start_harness(tmp_path / "d", **store_settings)
    try:
        s = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
        )
        ids = [
            (
                await h.memory.CreateEpisode(
                    memory_pb2.CreateEpisodeRequest(session_id=s.id, user_message=f"note {i}")
                )
            ).id
            for i in range(6)
        ]
        await wait_until(lambda: _zero(h))
        await h.app.index.delete("episodes", ids[:3])
        await h.app.index.upsert.__self__.upsert(  # an orphan point with no row
            "episodes",
            [
                __import__("nexus_grpc.vectors", fromlist=["VectorPoint"]).VectorPoint(
                    9999, [1.0] + [0.0] * 63, {"sessionId": s.id, "createdAt": 0}
                )
            ],
        )
        result = await h.memory.ReconcileIndex(memory_pb2.ReconcileIndexRequest())
        assert result.requeued == 3 and result.removed_orphans == 1
        await wait_until(lambda: _zero(h))
        assert await h.app.index.retrieve_ids("episodes", [*ids, 9999]) == set(ids)
    finally:
        await h.close()


async def test_reindex_rebuilds_the_index_with_a_new_embedder(tmp_path, store_settings):
    import io

    from nexus_grpc.ops.beside_server.reindex import reindex

    h = await start_harness(tmp_path / "d", **store_settings)
    s = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(session=memory_pb2.Session()))
    for i in range(5):
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=s.id, user_message=f"reindex me {i}")
        )
    await wait_until(lambda: _zero(h))
    await h.close()

    # The hashing embedder indexed this data; reindex switches it to the configured
    # (default) offline model.
    progress = io.StringIO()
    await reindex(Settings(data_dir=tmp_path / "d", **store_settings), progress=progress)
    assert "episodes" in progress.getvalue() and "5/5" in progress.getvalue()

    h = await start_harness(tmp_path / "d", embedder=make_embedder(threads=1), **store_settings)
    try:
        assert await h.app.index.count("episodes") == 5
        hits = [
            x
            async for x in h.memory.SearchEpisodes(
                memory_pb2.SearchEpisodesRequest(
                    query="reindex", session_id=s.id, mode=memory_pb2.SEARCH_MODE_SEMANTIC
                )
            )
        ]
        assert len(hits) == 5
    finally:
        await h.close()
