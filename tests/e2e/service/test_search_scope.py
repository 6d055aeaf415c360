"""The project isolation rule (a project's sessions share its memory, a
session outside any project keeps its own) on the semantic and hybrid paths,
SearchEpisodes' wiring and its errors, and FTS syntax reaching the stores'
engines as plain words.

The same rule on the keyword path, a query of FTS syntax alone finding
nothing, a keyword hit's snippet, and a hybrid search answering from the
keyword path alone while the embedder is down are tested on the fakes in
tests/unit/test_search_rules_episode_keyword.py."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import start_harness, wait_until

# The keyword path's scope: tests/unit/test_search_rules_episode_keyword.py.
MODES = [
    memory_pb2.SEARCH_MODE_SEMANTIC,
    memory_pb2.SEARCH_MODE_HYBRID,
]


@pytest.fixture
def h(each_backend):
    """Every test here runs on each search backend (tests/e2e/service/conftest.py)."""
    return each_backend


async def search(h, query, mode, session_id=0, project_id=0, limit=10):
    return [
        hit
        async for hit in h.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(
                query=query, session_id=session_id, project_id=project_id, mode=mode, limit=limit
            )
        )
    ]


async def indexed(h):
    async def done():
        rows = await h.app.db.read_sql(
            lambda c: c.execute(
                "SELECT COUNT(*) FROM jobs WHERE kind = 'index:episodes'"
            ).fetchone()[0]
        )
        return rows == 0

    await wait_until(done)


async def setup_world(h):
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    a = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    b = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    lone = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
    )
    other_project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="other"))
    )
    stranger = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=other_project.id))
    )
    text = "kubernetes cluster upgrade plan"
    eps = {}
    for name, s in (("a", a), ("b", b), ("lone", lone), ("stranger", stranger)):
        ep = await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=s.id, user_message=f"{text} from {name}", ai_response="ok"
            )
        )
        eps[name] = ep.id
    await indexed(h)
    return project, a, b, lone, stranger, eps


@pytest.mark.parametrize("mode", MODES)
async def test_seed_000_scope_table(h, mode):
    project, a, b, lone, stranger, eps = await setup_world(h)
    q = "kubernetes cluster upgrade"

    # In a project: every session of the project, never another project's.
    got = {hit.episode.id for hit in await search(h, q, mode, session_id=a.id)}
    assert got == {eps["a"], eps["b"]}
    # No project: only its own.
    got = {hit.episode.id for hit in await search(h, q, mode, session_id=lone.id)}
    assert got == {eps["lone"]}
    # project_id alone searches the project.
    got = {hit.episode.id for hit in await search(h, q, mode, project_id=project.id)}
    assert got == {eps["a"], eps["b"]}

    # Adding the lone session to the project: its pre-existing episode joins at once.
    await h.memory.UpdateSession(
        memory_pb2.UpdateSessionRequest(
            session=memory_pb2.Session(id=lone.id, project_id=project.id),
            update_mask=FieldMask(paths=["project_id"]),
        )
    )
    got = {hit.episode.id for hit in await search(h, q, mode, session_id=a.id)}
    assert got == {eps["a"], eps["b"], eps["lone"]}

    # Removing b: from the next call on, b sees only its own and a no longer sees b.
    await h.memory.UpdateSession(
        memory_pb2.UpdateSessionRequest(
            session=memory_pb2.Session(id=b.id, project_id=0),
            update_mask=FieldMask(paths=["project_id"]),
        )
    )
    assert {hit.episode.id for hit in await search(h, q, mode, session_id=b.id)} == {eps["b"]}
    assert {hit.episode.id for hit in await search(h, q, mode, session_id=a.id)} == {
        eps["a"],
        eps["lone"],
    }

    # Deleting the project takes its sessions: a search from one is NOT_FOUND
    # at once, and a session outside it keeps its own.
    await h.memory.DeleteProject(memory_pb2.DeleteProjectRequest(id=project.id))
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await search(h, q, mode, session_id=a.id)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    assert {hit.episode.id for hit in await search(h, q, mode, session_id=stranger.id)} == {
        eps["stranger"]
    }


async def test_hybrid_hits_say_which_paths_found_them_and_stream_in_rank_order(h):
    s = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(session=memory_pb2.Session()))
    for text in ["postgres replication lag", "postgres vacuum tuning", "lunch menu ideas"]:
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=s.id, user_message=text)
        )
    await indexed(h)
    hits = await search(
        h, "postgres replication", memory_pb2.SEARCH_MODE_UNSPECIFIED, session_id=s.id
    )
    assert hits[0].episode.user_message == "postgres replication lag"
    assert set(hits[0].sources) == {
        memory_pb2.SEARCH_SOURCE_KEYWORD,
        memory_pb2.SEARCH_SOURCE_SEMANTIC,
    }
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "postgres*", "col:umn", "NEAR(a b)", "a AND OR NOT", "'; DROP"],
)
async def test_fts_syntax_in_queries_is_searched_as_plain_words(h, query):
    s = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(session=memory_pb2.Session()))
    # Every word of every query is in the episode: searched as plain words,
    # each query must find it (an empty answer would pass an all() check).
    text = "postgres column near unbalanced col umn a b and or not drop"
    ep = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=s.id, user_message=text)
    )
    hits = await search(h, query, memory_pb2.SEARCH_MODE_KEYWORD, session_id=s.id)
    assert [hit.episode.id for hit in hits] == [ep.id]


async def test_search_errors(h):
    s = await h.memory.CreateSession(memory_pb2.CreateSessionRequest(session=memory_pb2.Session()))
    for kwargs, code, text in [
        ({"query": "  ", "session_id": s.id}, grpc.StatusCode.INVALID_ARGUMENT, "query"),
        ({"query": "x"}, grpc.StatusCode.INVALID_ARGUMENT, "session_id or project_id"),
        (
            {"query": "x", "session_id": s.id, "limit": 1000},
            grpc.StatusCode.INVALID_ARGUMENT,
            "maximum",
        ),
        ({"query": "x", "session_id": 999}, grpc.StatusCode.NOT_FOUND, "session 999"),
        ({"query": "x", "project_id": 999}, grpc.StatusCode.NOT_FOUND, "project 999"),
        ({"query": "x", "session_id": s.id, "mode": 42}, grpc.StatusCode.INVALID_ARGUMENT, "mode"),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await search(h, **{"mode": 0, **kwargs})
        assert info.value.code() == code
        assert text in info.value.details()


async def test_hybrid_answers_from_keywords_when_the_semantic_path_is_down(tmp_path):
    from nexus_grpc.embedding import EmbedderUnavailable
    from tests.support import HashingEmbedder

    embedder = HashingEmbedder()
    h = await start_harness(tmp_path / "data", embedder=embedder)
    try:
        s = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
        )
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=s.id, user_message="postgres replication lag"
            )
        )
        await indexed(h)
        embedder.fail_with = EmbedderUnavailable("embedding server is down")
        call = h.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(
                query="replication", session_id=s.id, mode=memory_pb2.SEARCH_MODE_HYBRID
            )
        )
        # The wiring: the answer's trailer says why (that the hits are the
        # keyword path's alone: tests/unit/test_search_rules_episode_keyword.py).
        assert len([hit async for hit in call]) == 1
        trailers = dict(await call.trailing_metadata())
        assert "embedding server is down" in trailers["x-nexus-degraded"]
        # Asking for meaning alone still says plainly that it cannot answer.
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await search(h, "replication", memory_pb2.SEARCH_MODE_SEMANTIC, session_id=s.id)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await h.close()
