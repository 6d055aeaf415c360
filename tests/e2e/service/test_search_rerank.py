"""The reranker stage through the real server: a rerank service stand-in over
real HTTP orders the default mode's fused candidates of episodes, memories and
entities and reads only the caller's scope; a slow or failing one leaves the
fused order with a reason on every hit and the trailer, never an error, and
is skipped for a while; the caller's gRPC deadline bounds it; a request can
opt out; health and metrics report it.

The stage's and the service's rules are decided on plain inputs in
tests/unit/test_rerank_rules_stage.py (only the first candidates reordered,
the rest in fused order, ties, any failure keeping the fused order, the
cooldown, the caller's share of the deadline); each way the client finds an
answer unusable (malformed, unreachable, an error status) is
tests/integration/rerank/test_rerank_client.py's."""

from __future__ import annotations

import io
import time

import grpc
import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.doctor import doctor
from tests.metrics_scrape import sample, scrape
from tests.rerank_stub import RerankStub, word_overlap
from tests.support import start_harness, wait_until

DEFAULT = memory_pb2.SEARCH_MODE_UNSPECIFIED
QUERY = "postgres replication"
TEXTS = [
    "postgres replication lag, postgres replication slots, postgres replication again",
    "replication of the postgres primary: the giraffe runbook",
    "postgres vacuum settings",
    "replication for the search index",
]
# Fused, the first text leads (it says the words most); the stand-in's
# "cross-encoder" knows the giraffe runbook is the answer.
FUSED_FIRST, RERANKED_FIRST = 0, 1


def prefers_giraffes(query: str, document: str) -> float:
    return 1.0 if "giraffe" in document.lower() else 0.5 * word_overlap(query, document)


@pytest.fixture
def reranker():
    with RerankStub("llama.cpp", scorer=prefers_giraffes) as stub:
        yield stub


async def serve(tmp_path, stub: RerankStub, **settings):
    return await start_harness(tmp_path / "data", reranker_url=stub.endpoint, **settings)


async def indexed(h) -> None:
    async def done():
        return not await h.app.db.read_sql(
            lambda c: c.execute("SELECT COUNT(*) FROM jobs WHERE kind LIKE 'index:%'").fetchone()[0]
        )

    await wait_until(done, timeout=20)


async def world(h):
    """A session with the four texts, and a stranger's session (another
    project) that says the same words and more."""
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    ids = []
    for text in TEXTS:
        episode = await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=text)
        )
        ids.append(episode.id)
    stranger = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
    )
    await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=stranger.id, user_message="postgres replication giraffe secrets"
        )
    )
    await indexed(h)
    return session, ids


async def search(h, session, **fields):
    call = h.memory.SearchEpisodes(
        memory_pb2.SearchEpisodesRequest(query=QUERY, session_id=session.id, **fields)
    )
    hits = [hit async for hit in call]
    return hits, dict(await call.trailing_metadata())


async def test_the_reranker_orders_the_fused_candidates_and_sees_only_the_scope(tmp_path, reranker):
    h = await serve(tmp_path, reranker)
    try:
        session, ids = await world(h)
        hits, _ = await search(h, session, mode=DEFAULT)
        assert [x.episode.id for x in hits][:2] == [ids[RERANKED_FIRST], ids[FUSED_FIRST]]
        assert all(x.reranked for x in hits) and all(not x.degraded_reason for x in hits)
        assert hits[0].score == 1.0  # the service's relevance score
        assert [x.score for x in hits] == sorted((x.score for x in hits), reverse=True)
        [sent] = reranker.requests
        assert sent["query"] == QUERY  # the question as asked, common words and all
        assert len(sent.documents) == len(hits)
        assert all(d.startswith("User: ") for d in sent.documents)
        assert not any("secrets" in d for d in sent.documents)  # never another scope's text
        assert "[" in hits[0].snippet  # the page is read (snippets) after it is reranked

        # The caller opts out, or asks for one path: the fused or that path's order.
        for fields in (
            {"mode": DEFAULT, "skip_rerank": True},
            {"mode": memory_pb2.SEARCH_MODE_KEYWORD},
            {"mode": memory_pb2.SEARCH_MODE_SEMANTIC},
        ):
            plain, _ = await search(h, session, **fields)
            assert not any(x.reranked or x.degraded_reason for x in plain), fields
        fused, _ = await search(h, session, mode=DEFAULT, skip_rerank=True)
        assert fused[0].episode.id == ids[FUSED_FIRST]
        assert len(reranker.requests) == 1  # none of those asked the service
    finally:
        await h.close()


# Only the slow service needs the short timeout it trips; the failing one
# answers at once, and a timeout as short on a loaded machine (a stalled loop)
# would name the timeout rather than its own fault. The other faults (a
# malformed answer, a service that is gone) are the client's to tell apart:
# tests/integration/rerank/test_rerank_client.py.
SLOW_TIMEOUT, OTHER_TIMEOUT = 0.3, 3.0
FAULTS = {
    "slow": (lambda stub: stub.delay(30), "did not answer within 0.30 s"),
    "failing": (
        lambda stub: stub.fail_with(500, {"error": {"code": 500, "message": "model crashed"}}),
        "HTTP 500: model crashed",
    ),
}


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_reranker_that_fails_leaves_the_fused_order_and_says_why(tmp_path, reranker, fault):
    timeout = SLOW_TIMEOUT if fault == "slow" else OTHER_TIMEOUT
    h = await serve(tmp_path, reranker, reranker_timeout=timeout)
    try:
        session, ids = await world(h)
        fused, _ = await search(h, session, mode=DEFAULT, skip_rerank=True)
        break_it, words = FAULTS[fault]
        break_it(reranker)
        started = time.monotonic()
        hits, trailers = await search(h, session, mode=DEFAULT)
        assert time.monotonic() - started < 5
        assert [x.episode.id for x in hits] == [x.episode.id for x in fused]
        assert [x.score for x in hits] == [x.score for x in fused]
        assert not any(x.reranked for x in hits)
        reason = hits[0].degraded_reason
        assert reason.startswith("reranker: ") and words in reason, reason
        assert all(x.degraded_reason == reason for x in hits)
        assert words in trailers["x-nexus-degraded"]
        # The next searches do not wait on it again: they skip it for a while.
        asked = len(reranker.requests)
        again, _ = await search(h, session, mode=DEFAULT)
        assert [x.episode.id for x in again] == [x.episode.id for x in fused]
        assert "skipped for" in again[0].degraded_reason and words in again[0].degraded_reason
        assert len(reranker.requests) == asked
    finally:
        await h.close()


async def test_the_rerank_time_counts_against_the_callers_deadline(tmp_path, reranker):
    h = await serve(tmp_path, reranker, reranker_timeout=60)
    try:
        session, ids = await world(h)
        reranker.delay(60)
        started = time.monotonic()
        call = h.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(query=QUERY, session_id=session.id), timeout=3.0
        )
        hits = [hit async for hit in call]
        assert time.monotonic() - started < 3.0
        assert await call.code() == grpc.StatusCode.OK
        assert hits and hits[0].episode.id == ids[FUSED_FIRST]
        assert "did not answer within" in hits[0].degraded_reason
        # The caller's short deadline, not the service, cut it short: no cooldown.
        reranker.clear_faults()
        hits, _ = await search(h, session, mode=DEFAULT)
        assert hits[0].episode.id == ids[RERANKED_FIRST] and hits[0].reranked
    finally:
        await h.close()


async def test_memories_and_entities_are_reranked_too(tmp_path, reranker):
    h = await serve(tmp_path, reranker)
    try:
        project = await h.memory.CreateProject(
            memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
        )
        for title in (
            "postgres replication postgres replication",
            "the giraffe runbook for replication",
        ):
            await h.memory.CreateMemory(
                memory_pb2.CreateMemoryRequest(
                    memory=memory_pb2.Memory(
                        kind=memory_pb2.MEMORY_KIND_PROJECT,
                        title=title,
                        content="kept for the team",
                        project_id=project.id,
                    )
                )
            )
        for name, notes in (("Postgres", "replication lag owner"), ("Giraffe", "replication")):
            await h.graph.UpsertEntity(
                graph_pb2.UpsertEntityRequest(
                    name=name, type="technology", notes=notes, project_id=project.id
                )
            )
        await indexed(h)
        scope = memory_pb2.MemoryScope(project_id=project.id)
        memories = [
            x
            async for x in h.memory.SearchMemories(
                memory_pb2.SearchMemoriesRequest(query=QUERY, scope=scope)
            )
        ]
        assert memories[0].memory.title.startswith("the giraffe") and memories[0].reranked
        assert reranker.requests[-1].documents[0].endswith("\nkept for the team")
        skipped = [
            x
            async for x in h.memory.SearchMemories(
                memory_pb2.SearchMemoriesRequest(query=QUERY, scope=scope, skip_rerank=True)
            )
        ]
        assert skipped[0].memory.title.startswith("postgres") and not skipped[0].reranked
        entities = [
            x
            async for x in h.graph.SearchEntities(
                graph_pb2.SearchEntitiesRequest(query="postgres replication", project_id=project.id)
            )
        ]
        assert entities[0].entity.name == "Giraffe" and entities[0].reranked
        assert "Giraffe (technology): replication" in reranker.requests[-1].documents
        plain = [
            x
            async for x in h.graph.SearchEntities(
                graph_pb2.SearchEntitiesRequest(
                    query="postgres replication", project_id=project.id, skip_rerank=True
                )
            )
        ]
        assert plain[0].entity.name == "Postgres" and not plain[0].reranked
    finally:
        await h.close()


async def test_health_and_doctor_report_the_reranker(tmp_path, reranker, stub):
    h = await serve(tmp_path, reranker, ollama_url=stub.url)  # every other dependency up
    try:
        status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
        deps = {d.name: d for d in status.dependencies}
        assert status.state == "SERVING" and deps["reranker"].ok, deps
        assert reranker.endpoint in deps["reranker"].detail
        assert "top 30 fused candidates" in deps["reranker"].detail
        out = io.StringIO()
        assert await doctor(h.target, 10.0, out=out) == 0
        assert "ok    reranker" in out.getvalue()
        reranker.stop()
        status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
        deps = {d.name: d for d in status.dependencies}
        assert status.state == "DEGRADED" and not deps["reranker"].ok
        assert "cannot reach" in deps["reranker"].detail
        out = io.StringIO()
        assert await doctor(h.target, 10.0, out=out) == 1
        assert "FAIL  reranker" in out.getvalue()
    finally:
        await h.close()


async def test_without_a_reranker_health_says_searches_keep_the_fused_order(harness):
    status = await harness.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
    deps = {d.name: d for d in status.dependencies}
    assert deps["reranker"].ok and deps["reranker"].off
    assert "not configured (--reranker-url)" in deps["reranker"].detail


async def test_metrics_count_each_outcome(tmp_path, reranker):
    h = await serve(tmp_path, reranker, reranker_timeout=0.3, metrics_listen="127.0.0.1:0")
    try:
        session, _ = await world(h)
        await search(h, session, mode=DEFAULT)
        reranker.delay(30)
        await search(h, session, mode=DEFAULT)
        await search(h, session, mode=DEFAULT)  # skipped: cooling down
        samples = await scrape(h)
        assert sample(samples, "nexus_rerank_requests_total", outcome="ok") == 1
        assert sample(samples, "nexus_rerank_requests_total", outcome="timeout") == 1
        assert sample(samples, "nexus_rerank_requests_total", outcome="skipped") == 1
        assert sample(samples, "nexus_rerank_duration_seconds_count") == 2
        assert sample(samples, "nexus_rerank_cooldown_seconds") > 0
    finally:
        await h.close()
