"""``nexus-grpc eval memories``: the dev set against issue 27's bar, through a
real server with the careful stand-in and the real embedder.

The command's scoring and its set checks are pure, and are tested in
tests/unit/test_eval_memory.py; which fact a memory states, a formation's end
read from its events, the storing and reading back on stand-in stubs and the
printed report in tests/unit/test_eval_rules_memory_run.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus_grpc.embedding import make_embedder
from nexus_grpc.evaluation.memory_eval import evaluate
from tests.careful_memory_model import CarefulMemoryModel
from tests.ollama_stub import OllamaStub
from tests.support import start_harness

DEV = Path(__file__).resolve().parents[3] / "bench" / "eval" / "memory-dev.json"


@pytest.mark.timeout(600)
async def test_the_dev_set_meets_the_bar_with_a_careful_model(tmp_path):
    with OllamaStub(responder=CarefulMemoryModel([str(DEV)])) as stub:
        h = await start_harness(
            tmp_path / "data", ollama_url=stub.url, embedder=make_embedder("minilm")
        )
        try:
            report = await evaluate(h.target, [str(DEV)], timeout=60)
        finally:
            await h.close()
    assert report["failures"] == [], report["failures"]
    assert report["facts_kept"] >= 0.95, report["misses"]
    assert report["stale_live"] == 0, report["misses"]
    assert (report["archived_lost"], report["absent_formed"]) == (0, 0), report["misses"]
    assert report["duplicates"] == 0, report["misses"]
    assert report["leaks"] == 0, report["misses"]
    assert report["unexpected"] == 0, report["misses"]
    # The account says what the events say about calls, and what they cost.
    cost = report["llm_cost"]
    assert cost["calls_per_episode"] == pytest.approx(report["llm_calls_per_episode"], abs=1e-3)
    assert set(cost["stages"]) == {"extraction", "formation"}
    assert cost["tokens_per_episode"] > 0
