"""The retrieval pipeline's stages on plain values: hydration reads on down
the ranking until the page is full, fusion and the keyword lead rank exactly
as ``ranking``'s functions (the flow before the stages, as an oracle), every
kind declares its paths and stages in one place, and production code does
not know the tests' stand-ins.

That filters never leave a page short on a real search (retention, a time
window) and that a path down is said on every hit stay whole-server, in
tests/e2e/service/test_search_pipeline.py."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.domain.retrieval import ENTITIES, EPISODES, MEMORIES, Call, Candidate, ranking
from nexus_grpc.domain.retrieval.filters import SPARE, Hydrate
from nexus_grpc.domain.retrieval.fusion import Fusion
from nexus_grpc.domain.retrieval.keyword_lead import KeywordLead
from nexus_grpc.domain.retrieval.recipes import WEIGHTS
from tests.fakes import FakeUnitOfWork

ROOT = Path(__file__).resolve().parents[2]


def test_hydration_reads_on_until_the_page_is_full():
    """Rows the filters drop (gone, out of scope) are replaced from further
    down the ranking, past the spare candidates read at first."""
    read: list[list[int]] = []

    def rows(uow, ids):
        read.append(list(ids))
        return {i: {"id": i} for i in ids if i % 3 == 0}  # two of three are gone

    call = Call("q", 10, SearchMode.HYBRID, None)
    call.depth = 10
    ranked = [Candidate(i, 1.0 / (i + 1), (SearchSource.KEYWORD,)) for i in range(60)]
    kept = Hydrate(rows, (lambda row, call: row["id"] != 30,))
    out = kept.apply(None, call, ranked, FakeUnitOfWork())  # type: ignore[arg-type]
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
                    (SearchSource.KEYWORD, by_keyword),
                    (SearchSource.SEMANTIC, by_semantic),
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
