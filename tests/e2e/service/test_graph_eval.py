"""``nexus-grpc eval graph`` against a real server: the dev set answered as a
careful model would (issue 26's bar), a server that cannot extract stopping
the run with the reason, and a name the LLM settles later followed through its
merge.

The command's arithmetic, its set format's checks and the careful stand-in
against the service's own prompts are pure, and are tested in
tests/unit/test_eval_graph.py; its run on stand-in stubs (an episode's event,
the stop on a server without an LLM, the graph read back through merges, a
project scored, the figures and the printed report) in
tests/unit/test_eval_rules_graph_run.py. Here, each of those against a real
server's answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nexus_grpc.evaluation.graph_eval import EvalError, evaluate, format_report
from nexus_grpc.evaluation.graph_set import load
from tests.careful_model import CarefulModel, careful_stub
from tests.graph_support import start_graph_harness
from tests.ollama_stub import OllamaStub, Reply

# The dev-set run goes through both systems of record: the graph's intervals,
# aliases and merges are SQL of their own on each.
BOTH_STORES = True
DEV_SET = Path(__file__).resolve().parents[3] / "bench" / "eval" / "graph-dev.json"


# The dev set through a real server --------------------------------------------------------


async def test_the_dev_set_with_a_careful_model_meets_the_bar(tmp_path, store_settings):
    with careful_stub([DEV_SET]) as stub:
        h = await start_graph_harness(tmp_path / "data", stub, **store_settings)
        try:
            report = await evaluate(h.target, [str(DEV_SET)], progress_out=None, episode_timeout=30)
        finally:
            await h.close()
    t = report["total"]
    why = format_report(report)
    assert t["episodes"] == t["done"] >= 60, why
    assert t["mentions_located"] == t["mentions"], why
    assert t["bcubed_f1"] >= 0.95, why
    assert t["false_merges"] == 0, why
    assert t["current_facts"]["accuracy"] == 1.0, why
    assert t["as_of"]["accuracy"] == 1.0, why
    assert t["llm_calls_per_episode"] <= 1.2, why
    assert t["resolution_pending"] == 0, why
    # The LLM was asked, and its answers were used: resolution by the rules
    # alone would not reach the bar (two Alexes, two Novaks, Postgres).
    assert t["aliases_by_method"].get("llm", 0) >= 3, why
    # The account agrees with the events on what the events count, and adds
    # what they do not: the session summaries, and every stage's tokens.
    cost = t["llm_cost"]
    stages = cost["stages"]
    assert stages["extraction"]["calls"] + stages["resolution"]["calls"] == t["llm_calls"], why
    assert set(stages) <= {"extraction", "resolution", "summary"}, why
    assert cost["tokens_per_episode"] > 0 and "tok/ep" in why and "LLM (GetUsage)" in why


async def test_a_server_that_cannot_extract_stops_the_run_with_the_reason(harness):
    # No LLM configured: extraction stays queued, so no event ever comes.
    with pytest.raises(EvalError) as info:
        await evaluate(harness.target, [str(DEV_SET)], progress_out=None, episode_timeout=1)
    message = str(info.value)
    assert "projects[0].sessions[0].episodes[0]: no extraction event within 1s" in message
    assert "SERVING without an LLM" in message and "not configured" in message


TWO_ALEXES = {
    "projects": [
        {
            "name": "two-alexes",
            "sessions": [
                {
                    "name": "one",
                    "episodes": [
                        {
                            "occur_time": "2024-02-01T09:00:00Z",
                            "user": "Alex Kim (design) and Alex Chen (data) both joined this week.",
                            "assistant": "Two Alexes! I'll keep them apart by surname.",
                            "extraction": {
                                "entities": [
                                    {"name": "Alex Kim", "type": "person", "notes": "Designer",
                                     "is": "kim"},
                                    {"name": "Alex Chen", "type": "person",
                                     "notes": "Data engineer", "is": "chen"},
                                ],
                                "relationships": [],
                            },
                        },
                        {
                            "occur_time": "2024-02-02T09:00:00Z",
                            "user": "Alex fixed the data pipeline overnight.",
                            "assistant": "The data engineer came through, then.",
                            "extraction": {
                                "entities": [
                                    {"name": "Alex", "type": "person",
                                     "notes": "Fixed the pipeline", "is": "chen"}
                                ],
                                "relationships": [],
                            },
                        },
                    ],
                }
            ],
            "expected": {
                "entities": [
                    {"key": "kim", "name": "Alex Kim", "type": "person", "aliases": []},
                    {"key": "chen", "name": "Alex Chen", "type": "person", "aliases": ["Alex"]},
                ],
                "relationships": [],
            },
        }
    ]
}  # fmt: skip


async def test_a_name_the_llm_settles_later_is_followed_through_its_merge(tmp_path):
    path = tmp_path / "two-alexes.json"
    path.write_text(json.dumps(TWO_ALEXES), encoding="utf-8")
    careful = CarefulModel(load([path]))
    refused: list[str] = []

    def first_question_unanswered(endpoint: str, body: dict) -> Reply | None:
        # The episode's own question fails, so "Alex" is kept apart, pending;
        # the resolve job asks again, and the careful answer merges it.
        if "Names and their candidates" in json.dumps(body) and not refused:
            refused.append(endpoint)
            return Reply.error_status(500, "runner crashed")
        return careful(endpoint, body)

    with OllamaStub(responder=first_question_unanswered) as stub:
        h = await start_graph_harness(tmp_path / "data", stub)
        try:
            report = await evaluate(h.target, [str(path)], progress_out=None, episode_timeout=30)
        finally:
            await h.close()
    t, misses = report["total"], report["misses"]["two-alexes"]
    why = format_report(report)
    assert refused and careful.resolutions >= 1, why
    # The event named a pending "Alex"; the merge that followed put it in Alex Chen.
    [episode] = [e for e in report["projects"]["two-alexes"]["episodes"] if "Alex (" in str(e)]
    assert "Alex (person" in episode["entities"][0], why
    assert t["llm_merges"] == 1 and t["resolution_pending"] == 0, why
    assert (t["bcubed_f1"], t["duplicate_entities"], t["false_merges"]) == (1.0, 0, 0), why
    [merge] = misses["llm_merges"]
    assert merge.startswith("Alex (#") and " into Alex Chen (#" in merge, why
    assert f"LLM merge: {merge}" in why
