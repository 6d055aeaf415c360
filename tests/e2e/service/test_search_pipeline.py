"""The retrieval pipeline: filters run before the page is cut, its stages rank
exactly as the functions they wrap, and every kind is declared in one place."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.domain.retrieval import ENTITIES, EPISODES, MEMORIES, Call, Candidate, ranking
from nexus_grpc.domain.retrieval.filters import SPARE, Hydrate
from nexus_grpc.domain.retrieval.fusion import Fusion
from nexus_grpc.domain.retrieval.keyword_lead import KeywordLead
from nexus_grpc.domain.retrieval.recipes import WEIGHTS
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.store import jobs
from nexus_grpc.store.sqlite.connection import connect as sqlite_connect
from tests.support import wait_until

DAY = 86_400
MODES = [
    memory_pb2.SEARCH_MODE_KEYWORD,
    memory_pb2.SEARCH_MODE_SEMANTIC,
    memory_pb2.SEARCH_MODE_HYBRID,
]
ROOT = Path(__file__).resolve().parents[3]


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


def test_hydration_reads_on_until_the_page_is_full():
    """Rows the filters drop (gone, out of scope) are replaced from further
    down the ranking, past the spare candidates read at first."""
    read: list[list[int]] = []

    def rows(conn, ids):
        read.append(list(ids))
        return {i: {"id": i} for i in ids if i % 3 == 0}  # two of three are gone

    call = Call("q", 10, SearchMode.HYBRID, None)
    call.depth = 10
    ranked = [Candidate(i, 1.0 / (i + 1), (SearchSource.KEYWORD,)) for i in range(60)]
    kept = Hydrate(rows, (lambda row, call: row["id"] != 30,))
    out = kept.apply(None, call, ranked, sqlite_connect(":memory:"))  # type: ignore[arg-type]
    assert [c.key for c in out][:10] == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]
    assert len(out) >= 10
    assert read[0] == list(range(10 + SPARE))  # the first read is the page and the spare
    assert len(read) > 1


pairs = st.lists(
    st.tuples(st.integers(0, 40), st.floats(-1, 30, allow_nan=False)), max_size=30
).map(lambda items: list(dict(items).items()))


@settings(max_examples=300, deadline=None)
@given(keyword=pairs, semantic=pairs, temperature=st.sampled_from([0.03, 0.05]))
def test_fusion_and_the_keyword_lead_rank_exactly_as_ranking_fuse(keyword, semantic, temperature):
    """The pipeline's stages are the old flow, bit for bit: the same keys, order and scores."""
    keyword = sorted(keyword, key=lambda p: -p[1])
    semantic = sorted(semantic, key=lambda p: -p[1])

    class Embedder:
        similarity_temperature = temperature

    class Engine:
        recipe = MEMORIES
        embedder = Embedder()

    call = Call("q", 100, SearchMode.HYBRID, None)
    call.found[SearchSource.KEYWORD] = [
        Candidate(k, s, (SearchSource.KEYWORD,)) for k, s in keyword
    ]
    call.found[SearchSource.SEMANTIC] = [
        Candidate(k, s, (SearchSource.SEMANTIC,)) for k, s in semantic
    ]
    engine = Engine()
    ranked = Fusion(WEIGHTS).apply(engine, call, [], None)  # type: ignore[arg-type]
    ranked = KeywordLead().apply(engine, call, ranked, None)  # type: ignore[arg-type]
    assert [(c.key, c.score, c.sources) for c in ranked] == reference_fusion(
        keyword, semantic, temperature
    )


def reference_fusion(keyword, semantic, temperature):
    """The flow as it was written before the pipeline's stages, as an oracle:
    scores fused by likelihood, the
    keyword best led to the top; (key, score, sources) best first."""
    by_keyword = dict(keyword)
    by_semantic = dict(semantic)
    keyword_scores = list(by_keyword.items())
    fused = ranking.fused_likelihoods(
        [
            ranking.PathScores(
                keyword_scores, ranking.KEYWORD_WEIGHT, ranking.KEYWORD_TEMPERATURE,
                ranking.MEANINGFUL_BM25,
            ),
            ranking.PathScores(
                list(by_semantic.items()), 1.0 - ranking.KEYWORD_WEIGHT, temperature
            ),
        ]
    )  # fmt: skip
    led = ranking.with_keyword_lead(fused, keyword_scores)
    return [
        (
            key,
            score,
            tuple(
                source
                for source, found in (
                    (SearchSource.KEYWORD, by_keyword), (SearchSource.SEMANTIC, by_semantic)
                )
                if key in found
            ),
        )
        for key, score in led
    ]


def test_every_kind_declares_paths_fusion_filters_rerank_and_page_in_one_place():
    for recipe in (EPISODES, MEMORIES, ENTITIES):
        names = [type(s).__name__ for s in recipe.stages]
        assert names[0] == "Fusion"
        filters = next(n for n in names if n in ("Hydrate", "Keep"))
        # Filters before the reranker (it reads only what the caller may see),
        # both before the page (no filter leaves a page short).
        assert names.index(filters) < names.index("Rerank") < names.index("Page")
        assert [p.source for p in recipe.paths] == [SearchSource.KEYWORD, SearchSource.SEMANTIC]


def test_production_code_does_not_know_the_stand_ins():
    """The rerank and Ollama stand-ins live in tests/ only: nothing the server
    runs names them or imports from tests."""
    pattern = re.compile(
        r"rerank_stub|RerankStub|ollama_stub|OllamaStub|^\s*(from|import) tests\b", re.M
    )
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "nexus_grpc").rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


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
