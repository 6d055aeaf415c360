"""SearchEpisodes in keyword mode (domain/retrieval/search.py's EpisodeSearch),
on the fakes of tests/fakes.py, whose keyword index matches as both stores do
(tests/integration/store/test_repository_contract_keyword.py): a session in a
project searches every session of the project and never another project's,
a session outside any project only its own, project_id alone the project;
a session moved into or out of a project moves its episodes with it at once,
and a deleted project's session is NOT_FOUND; a query of FTS syntax alone has
no word and finds nothing, without an error; a keyword hit's snippet brackets
the word it matched; with the embedder down, a hybrid search answers from the
keyword path alone and says why, and a semantic one is UNAVAILABLE.

The same scope on the semantic and hybrid paths, and the RPC's wiring (the
x-nexus-degraded trailer among it), are tests/e2e/service/test_search_scope.py's;
the stores' own ranking and FTS syntax reaching a real engine are the e2e and
store tiers'.
"""

from __future__ import annotations

import pytest

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.retrieval.search import EpisodeSearch
from nexus_grpc.embedding import EmbedderUnavailable
from nexus_grpc.errors import NotFound, Unavailable
from tests.fakes import FakeDatabase, FakeUnitOfWork

KEYWORD = SearchMode.KEYWORD


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def conv(uow: FakeUnitOfWork) -> Conversations:
    return Conversations(FakeDatabase(uow), JobSignals())


async def search(uow: FakeUnitOfWork, query: str, session_id: int = 0, project_id: int = 0) -> list:
    # Keyword mode reads no embedder and no vector index.
    engine = EpisodeSearch(FakeDatabase(uow), None, None)  # type: ignore[arg-type]
    return [h async for h in engine.search(query, session_id, project_id, 10, KEYWORD)]


async def found(uow: FakeUnitOfWork, query: str, **where: int) -> set[int]:
    return {hit.episode.id for hit in await search(uow, query, **where)}


async def world(conv: Conversations):
    """Sessions a and b of a project, a lone session and another project's
    session, each with one exchange naming itself."""
    project = await conv.create_project({"name": "p"})
    a = await conv.create_session("", "", project.id, {})
    b = await conv.create_session("", "", project.id, {})
    lone = await conv.create_session("", "", 0, {})
    other = await conv.create_project({"name": "other"})
    stranger = await conv.create_session("", "", other.id, {})
    eps = {}
    for name, s in (("a", a), ("b", b), ("lone", lone), ("stranger", stranger)):
        text = f"kubernetes cluster upgrade plan from {name}"
        eps[name] = (await conv.create_episode(s.id, text, "ok", {}, "")).id
    return project.id, (a.id, b.id, lone.id, stranger.id), eps


async def test_a_session_searches_its_projects_sessions_and_a_lone_one_only_its_own(uow, conv):
    project, (a, _, lone, _), eps = await world(conv)
    q = "kubernetes cluster upgrade"
    assert await found(uow, q, session_id=a) == {eps["a"], eps["b"]}
    assert await found(uow, q, session_id=lone) == {eps["lone"]}
    assert await found(uow, q, project_id=project) == {eps["a"], eps["b"]}


async def test_a_session_moved_into_or_out_of_a_project_moves_its_episodes_at_once(uow, conv):
    project, (a, b, lone, _), eps = await world(conv)
    q = "kubernetes cluster upgrade"
    # Adding the lone session: its episode joins at once.
    await conv.update_session(lone, {"project_id": project}, ["project_id"])
    assert await found(uow, q, session_id=a) == {eps["a"], eps["b"], eps["lone"]}
    # Removing b: b sees only its own, and a no longer sees b.
    await conv.update_session(b, {"project_id": 0}, ["project_id"])
    assert await found(uow, q, session_id=b) == {eps["b"]}
    assert await found(uow, q, session_id=a) == {eps["a"], eps["lone"]}


async def test_a_deleted_projects_session_is_not_found_and_another_keeps_its_own(uow, conv):
    project, (a, _, _, stranger), eps = await world(conv)
    q = "kubernetes cluster upgrade"
    assert await found(uow, q, session_id=a) == {eps["a"], eps["b"]}  # the positive case
    await conv.delete_project(project)
    with pytest.raises(NotFound):
        await search(uow, q, session_id=a)
    assert await found(uow, q, session_id=stranger) == {eps["stranger"]}


async def test_a_query_of_fts_syntax_alone_finds_nothing_and_is_no_error(uow, conv):
    s = await conv.create_session("", "", 0, {})
    await conv.create_episode(s.id, "((() x", "", {}, "")
    assert await search(uow, "x", session_id=s.id)  # the positive case
    assert await search(uow, "((()", session_id=s.id) == []


async def test_a_keyword_hit_brackets_the_word_it_matched_in_its_snippet(uow, conv):
    s = await conv.create_session("", "", 0, {})
    for text in ["postgres replication lag", "postgres vacuum tuning", "lunch menu ideas"]:
        await conv.create_episode(s.id, text, "", {}, "")
    hits = await search(uow, "replication", session_id=s.id)
    assert [h.episode.user_message for h in hits] == ["postgres replication lag"]
    assert hits[0].snippet.count("[replication]") == 1


class DownEmbedder:
    """An embedding server that cannot be reached."""

    similarity_floor = 0.1
    similarity_temperature = 0.05

    async def embed_query(self, text: str) -> list[float]:
        raise EmbedderUnavailable("embedding server is down")


class NoIndex:
    async def search(self, collection: str, vector, *, filter, limit: int):
        raise AssertionError("the index is never reached without a query vector")


async def test_hybrid_answers_from_keywords_when_the_semantic_path_is_down(uow, conv):
    s = await conv.create_session("", "", 0, {})
    await conv.create_episode(s.id, "postgres replication lag", "", {}, "")
    search = EpisodeSearch(FakeDatabase(uow), DownEmbedder(), NoIndex())  # type: ignore[arg-type]
    reasons: list[str] = []
    hits = [
        h
        async for h in search.search(
            "replication", s.id, 0, 10, SearchMode.HYBRID, on_degraded=reasons.append
        )
    ]
    assert [h.sources for h in hits] == [(SearchSource.KEYWORD,)]
    assert len(reasons) == 1 and "embedding server is down" in reasons[0]
    # Asking for meaning alone still says plainly that it cannot answer.
    with pytest.raises(Unavailable):
        [h async for h in search.search("replication", s.id, 0, 10, SearchMode.SEMANTIC)]
