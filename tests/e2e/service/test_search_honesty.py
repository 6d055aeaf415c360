"""A search returns only what some path really matched, and explain says the
true reason a path did not find a hit (issue 47, item 12). With the real
default embedder (MiniLM): its floor is a property of the model's cosines.

The newcomer's project: the README's exchanges, where "which port is the
database on" brought back "I prefer short answers" at cosine -0.029, and
explain said "not among its best 30" of a keyword path that had found every
match there was."""

from __future__ import annotations

import pytest

from nexus_grpc.embedding import make_embedder
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.search_explanations import QUESTION, indexed, note
from tests.support import Harness, start_harness

# Every harness test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

KEYWORD, SEMANTIC, HYBRID = (
    memory_pb2.SEARCH_MODE_KEYWORD,
    memory_pb2.SEARCH_MODE_SEMANTIC,
    memory_pb2.SEARCH_MODE_HYBRID,
)
README = (
    ("Our Postgres runs on port 5433", "Noted."),
    ("Our Postgres runs on port 5433", "Noted."),
    ("I prefer short answers", "Understood."),
)
UNRELATED = "I prefer short answers"


@pytest.fixture
async def h(tmp_path, store_settings):
    harness = await start_harness(
        tmp_path / "data", embedder=make_embedder("minilm"), **store_settings
    )
    yield harness
    await harness.close()


async def project_of(h: Harness, exchanges) -> int:
    """A project of these exchanges, oldest first, and a PROJECT memory of each
    first turn; returns its id."""
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="honest"))
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    for user_message, answer in exchanges:
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id, user_message=user_message, ai_response=answer
            )
        )
    for text in dict.fromkeys(u for u, _ in exchanges):
        await h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=project.id,
                    title=text[:20], content=text,
                )
            )
        )  # fmt: skip
    await indexed(h)
    return project.id


async def episodes(h: Harness, project_id: int, mode: int, limit: int = 10) -> list:
    request = memory_pb2.SearchEpisodesRequest(
        query=QUESTION, project_id=project_id, mode=mode, limit=limit, explain=True
    )
    return [hit async for hit in h.memory.SearchEpisodes(request)]


async def memories(h: Harness, project_id: int, mode: int) -> list:
    request = memory_pb2.SearchMemoriesRequest(
        query=QUESTION, scope=memory_pb2.MemoryScope(project_id=project_id), mode=mode
    )
    return [hit async for hit in h.memory.SearchMemories(request)]


async def test_a_hit_whose_meaning_matched_nothing_does_not_come_back(h):
    project_id = await project_of(h, README)
    for mode in (SEMANTIC, HYBRID):
        found = await episodes(h, project_id, mode)
        texts = [hit.episode.user_message for hit in found]
        assert UNRELATED not in texts, (mode, texts)
        assert "Our Postgres runs on port 5433" in texts
        kept = [hit.memory.content for hit in await memories(h, project_id, mode)]
        assert UNRELATED not in kept and "Our Postgres runs on port 5433" in kept, kept
    # What a path did match still comes back, whatever the other made of it.
    found = await episodes(h, project_id, KEYWORD)
    assert [hit.episode.user_message for hit in found] == ["Our Postgres runs on port 5433"] * 2


async def test_explain_says_no_query_word_matched_when_none_did(h):
    # The keyword path found every text that holds a query word ("port"),
    # fewer than it was asked for: a hit it did not find holds none.
    project_id = await project_of(
        h,
        (
            ("Port the tests to pytest", "Noted."),
            ("Port the scripts to Go", "Noted."),
            ("Port the build to CMake", "Noted."),
            ("Postgres listens for connections on 5433", "Noted."),
        ),
    )
    by_text = {hit.episode.user_message: hit for hit in await episodes(h, project_id, HYBRID)}
    assert note(by_text["Postgres listens for connections on 5433"], "keyword") == (
        "no query word matched"
    )
    # A keyword hit whose meaning matched nothing says so in its semantic stage.
    floored = note(by_text["Port the scripts to Go"], "semantic")
    assert floored.startswith("cosine 0.0"), floored
    assert floored.endswith(", below 0.1: its meaning matched nothing"), floored
