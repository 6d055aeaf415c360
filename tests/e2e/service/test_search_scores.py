"""Scores mean what the README says on every project size: higher is better,
and a hit a path matched never scores 0, however small the project (bm25
floors a word found in half a tiny project's texts at about 0)."""

from __future__ import annotations

from nexus_grpc.embedding import EmbedderUnavailable
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import HashingEmbedder, index_idle, start_harness, wait_until

# Every harness test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

KEYWORD, HYBRID = memory_pb2.SEARCH_MODE_KEYWORD, memory_pb2.SEARCH_MODE_HYBRID
EXCHANGES = (
    "Our Postgres runs on port 5433",
    "The Postgres backups run nightly at two",
    "I like green tea in the morning",
)


async def small_project(h) -> tuple[int, int]:
    """A project of three exchanges and three memories: FTS5's IDF of a word
    in two of three texts is floored to 1e-6."""
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="small"))
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    for text in EXCHANGES:
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id, user_message=text, ai_response="Noted."
            )
        )
        await h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=project.id,
                    title=text[:20], content=text,
                )
            )
        )  # fmt: skip
    return project.id, session.id


async def episode_hits(
    h, session_id: int, mode: int, query: str = "postgres port"
) -> list[memory_pb2.SearchHit]:
    request = memory_pb2.SearchEpisodesRequest(query=query, session_id=session_id, mode=mode)
    return [hit async for hit in h.memory.SearchEpisodes(request)]


async def memory_hits(
    h, project_id: int, mode: int, query: str = "postgres port"
) -> list[memory_pb2.MemoryHit]:
    request = memory_pb2.SearchMemoriesRequest(
        query=query, scope=memory_pb2.MemoryScope(project_id=project_id), mode=mode
    )
    return [hit async for hit in h.memory.SearchMemories(request)]


async def test_keyword_hits_score_between_a_half_and_one_on_a_small_project(harness):
    h = harness
    project_id, session_id = await small_project(h)
    for hits in (
        await episode_hits(h, session_id, KEYWORD),
        await memory_hits(h, project_id, KEYWORD),
        await episode_hits(h, session_id, KEYWORD, "postgres"),
        await memory_hits(h, project_id, KEYWORD, "postgres"),
    ):
        assert len(hits) == 2
        scores = [hit.score for hit in hits]
        # Every match scores at least what bm25 0 does, whatever the project's
        # size (bm25 itself was 0.000002 here on SQLite).
        assert all(0.5 <= s < 1.0 for s in scores), scores
        assert scores == sorted(scores, reverse=True)
        assert all(list(hit.sources) == [memory_pb2.SEARCH_SOURCE_KEYWORD] for hit in hits)


async def test_hybrid_hits_only_keywords_found_score_above_zero(tmp_path, store_settings):
    # The semantic path down: the keyword list alone. "postgres" is in two of
    # the three texts, so its bm25 is about 0: the list orders nothing and
    # adds nothing to a fused score.
    embedder = HashingEmbedder()
    h = await start_harness(tmp_path / "data", embedder=embedder, **store_settings)
    try:
        project_id, session_id = await small_project(h)
        await wait_until(lambda: index_idle(h))
        embedder.fail_with = EmbedderUnavailable("embedding server is down")
        for hits in (
            await episode_hits(h, session_id, HYBRID, "postgres"),
            await memory_hits(h, project_id, HYBRID, "postgres"),
        ):
            scores = [hit.score for hit in hits]
            assert len(hits) == 2 and all(0 < s <= 1 for s in scores), scores
            assert scores == sorted(scores, reverse=True)
            assert all(list(hit.sources) == [memory_pb2.SEARCH_SOURCE_KEYWORD] for hit in hits)
    finally:
        await h.close()
