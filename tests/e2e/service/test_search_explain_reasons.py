"""When a path took as many candidates as it was asked for, a hit it did not
rank may still have matched: explain asks the path, and says "no query word
matched" or "not among its best N" as the truth is (issue 47, item 12).

On SQLite only: the arrangement needs a keyword list that orders nothing (a
word in most of a project's texts weighs nothing in SQLite's IDF), so that
the meaning alone decides the first hit. PostgreSQL's keyword scores order
such matches, and the same words are checked on both stores by
tests/integration/store/test_keyword_matching.py and, for a path that found
every match it had, by test_search_honesty.py."""

from __future__ import annotations

import pytest

from nexus_grpc.embedding import make_embedder
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.search_explanations import QUESTION, indexed, note
from tests.support import Harness, start_harness

HYBRID = memory_pb2.SEARCH_MODE_HYBRID


@pytest.fixture
async def h(tmp_path):
    harness = await start_harness(tmp_path / "data", embedder=make_embedder("minilm"))
    yield harness
    await harness.close()


async def project_of(h: Harness, *sessions) -> int:
    """A project of these sessions' exchanges, each session in order."""
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="reasons"))
    )
    for exchanges in sessions:
        session = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
        )
        for user_message, answer in exchanges:
            await h.memory.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(
                    session_id=session.id, user_message=user_message, ai_response=answer
                )
            )
    await indexed(h)
    return project.id


async def first_hit(h: Harness, project_id: int):
    # Asked for one hit, each path takes three candidates.
    request = memory_pb2.SearchEpisodesRequest(
        query=QUESTION, project_id=project_id, mode=HYBRID, limit=1, explain=True
    )
    [hit] = [hit async for hit in h.memory.SearchEpisodes(request)]
    assert not hit.degraded_reason
    return hit


async def test_a_full_keyword_list_that_left_out_every_match_says_no_word_matched(h):
    # "port" is in three of the four texts: the keyword path takes all three,
    # they weigh nothing, and the meaning puts first the one without it.
    project_id = await project_of(
        h,
        (
            ("Port the tests to pytest", "Noted."),
            ("Port the scripts to Go", "Noted."),
            ("Port the build to CMake", "Noted."),
            ("Postgres listens for connections on 5433", "Noted."),
        ),
    )
    first = await first_hit(h, project_id)
    assert first.episode.user_message == "Postgres listens for connections on 5433"
    assert note(first, "keyword") == "no query word matched"


async def test_a_full_keyword_list_says_not_among_its_best_of_a_match_it_left_out(h):
    # Four texts hold "port": the three of the second session hold it in both
    # turns and weigh more; the first, which the meaning puts first, matched too.
    project_id = await project_of(
        h,
        (("Our Postgres server listens on port 5433", "Noted."),),
        (
            ("Port the tests to pytest", "Will port them."),
            ("Port the scripts to Go", "Will port them."),
            ("Port the build to CMake", "Will port it."),
        ),
    )
    first = await first_hit(h, project_id)
    assert first.episode.user_message == "Our Postgres server listens on port 5433"
    assert note(first, "keyword") == "not among its best 3"
