"""``explain``: each hit says what every stage of the pipeline made of it
(issue 37, item 1), for episodes, memories and entities, and nothing of it is
computed or sent without it. A real server, a real reranker stand-in.

The record's own rules are the unit tier's: stage order and misses in
tests/unit/test_explain.py, the reranker's order, a hit past its candidates,
its failure and its skip in tests/unit/test_rerank_rules_stage.py."""

from __future__ import annotations

import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.rerank_stub import RerankStub
from tests.support import Harness, index_idle, start_harness, wait_until

HYBRID, KEYWORD = memory_pb2.SEARCH_MODE_HYBRID, memory_pb2.SEARCH_MODE_KEYWORD
TEXTS = [
    "We moved the falcon release to Thursday",
    "The falcon team prefers Postgres for the ledger",
    "Lunch on Friday is at the Lebanese place",
    "Thursday standup moves to the big room",
]


async def world(h: Harness) -> tuple[int, int]:
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="explain"))
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    for text in TEXTS:
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=text)
        )
        await h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=project.id,
                    title=text[:20], content=text,
                )
            )
        )  # fmt: skip
    for name, etype in (("Falcon", "project"), ("Postgres", "technology")):
        await h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name=name, type=etype, project_id=project.id)
        )

    async def indexed() -> bool:
        return await index_idle(h)

    await wait_until(indexed, timeout=30)
    return project.id, session.id


def stages(hit) -> list[tuple[str, int]]:
    return [(s.stage, s.rank) for s in hit.explanation.stages]


@pytest.fixture
async def plain(tmp_path):
    h = await start_harness(tmp_path / "data")
    yield h
    await h.close()


async def test_a_hybrid_episode_search_explains_each_stage_in_order(plain):
    project_id, _ = await world(plain)
    ask = memory_pb2.SearchEpisodesRequest(query="falcon thursday", project_id=project_id)
    quiet = [hit async for hit in plain.memory.SearchEpisodes(ask)]
    assert quiet and not any(hit.HasField("explanation") for hit in quiet)
    ask.explain = True
    hits = [hit async for hit in plain.memory.SearchEpisodes(ask)]
    # Asking to explain changes nothing of the answer itself.
    assert [(h.episode.id, h.score) for h in hits] == [(h.episode.id, h.score) for h in quiet]
    for position, hit in enumerate(hits, start=1):
        names = [s.stage for s in hit.explanation.stages]
        assert names == ["keyword", "semantic", "fused", "filtered", "reranked"]
        by = {s.stage: s for s in hit.explanation.stages}
        # The order the caller sees is the filtered one (no reranker ran).
        assert by["filtered"].rank == position
        assert by["reranked"].rank == 0
        assert "skipped: no reranker is configured" in by["reranked"].note
        if by["keyword"].rank:
            # Its own words, or (an episode is read with its neighbouring
            # turns) its neighbours'.
            note = by["keyword"].note
            assert by["keyword"].score > 0
            if note.startswith("matched: "):
                assert set(note.removeprefix("matched: ").split(", ")) <= {"falcon", "thursday"}
                text = hit.episode.user_message.lower()
                assert all(w in text for w in note.removeprefix("matched: ").split(", "))
            else:
                assert note == "matched in its neighbouring turns or its other names"
        assert by["semantic"].rank > 0  # every episode of a 4-episode scope is a candidate
    best = {s.stage: s for s in hits[0].explanation.stages}
    assert best["keyword"].rank == 1 and best["fused"].rank == 1
    # A stage's ranks are a ranking: distinct, from 1.
    fused = sorted(s.rank for h in hits for s in h.explanation.stages if s.stage == "fused")
    assert fused == list(range(1, len(hits) + 1))


async def test_a_single_path_search_explains_that_path_only(plain):
    project_id, _ = await world(plain)
    hits = [
        hit
        async for hit in plain.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(
                query="Postgres ledger", project_id=project_id, mode=KEYWORD, explain=True
            )
        )
    ]
    assert hits
    assert stages(hits[0]) == [("keyword", 1), ("filtered", 1)]
    assert "postgres" in hits[0].explanation.stages[0].note


async def test_memories_and_entities_explain_the_same_pipeline(plain):
    project_id, _ = await world(plain)
    memories = [
        hit
        async for hit in plain.memory.SearchMemories(
            memory_pb2.SearchMemoriesRequest(
                query="falcon", scope=memory_pb2.MemoryScope(project_id=project_id), explain=True
            )
        )
    ]
    assert memories and [s.stage for s in memories[0].explanation.stages] == [
        "keyword", "semantic", "fused", "filtered", "reranked"
    ]  # fmt: skip
    entities = [
        hit
        async for hit in plain.graph.SearchEntities(
            graph_pb2.SearchEntitiesRequest(query="falcon", project_id=project_id, explain=True)
        )
    ]
    assert entities[0].entity.name == "Falcon"
    by = {s.stage: s for s in entities[0].explanation.stages}
    assert by["keyword"].rank == 1 and by["fused"].rank == 1
    quiet = [
        hit
        async for hit in plain.graph.SearchEntities(
            graph_pb2.SearchEntitiesRequest(query="falcon", project_id=project_id)
        )
    ]
    assert not quiet[0].HasField("explanation")


async def test_the_reranker_stage_shows_its_order_its_failure_or_its_skip(tmp_path):
    with RerankStub("llama.cpp") as rerank:
        h = await start_harness(tmp_path / "data", reranker_url=rerank.url)
        try:
            project_id, _ = await world(h)
            ask = memory_pb2.SearchEpisodesRequest(
                query="falcon thursday", project_id=project_id, explain=True
            )
            hits = [hit async for hit in h.memory.SearchEpisodes(ask)]
            reranked = [{s.stage: s for s in hit.explanation.stages}["reranked"] for hit in hits]
            assert [r.rank for r in reranked if r.rank] == list(range(1, len(hits) + 1))
            assert [r.score for r in reranked] == [hit.score for hit in hits]
            rerank.fail_with(500, {"error": {"message": "model crashed"}})
            failed = [hit async for hit in h.memory.SearchEpisodes(ask)]
            notes = {s.note for hit in failed for s in hit.explanation.stages
                     if s.stage == "reranked"}  # fmt: skip
            assert len(notes) == 1 and "failed, the fused order stands" in notes.pop()
            rerank.clear_faults()
            ask.skip_rerank = True
            skipped = [hit async for hit in h.memory.SearchEpisodes(ask)]
            last = skipped[0].explanation.stages[-1]
            assert (last.stage, last.rank) == ("reranked", 0)
            assert "skip_rerank" in last.note
        finally:
            await h.close()
