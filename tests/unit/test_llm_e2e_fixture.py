"""The fixed episodes of ``make e2e-llm`` and the scoring of its run.

The real-model run itself takes tens of minutes (``make e2e-llm``, part of
``make soak``); these checks keep its hand-written expected lists fair and
its arithmetic right, in milliseconds: they read the run's committed files
(bench/e2e_llm/episodes.json, its scoring in bench/e2e_llm/run.py) and start
no model, server or network."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2

E2E = Path(__file__).resolve().parents[2] / "bench" / "e2e_llm"
FIXTURE = json.loads((E2E / "episodes.json").read_text())
EPISODES = [e for s in FIXTURE["sessions"] for e in s["episodes"]]


def _runner():
    spec = importlib.util.spec_from_file_location("e2e_llm_run", E2E / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_twenty_episodes_in_four_sessions_each_with_expectations():
    assert [len(s["episodes"]) for s in FIXTURE["sessions"]] == [5, 5, 5, 5]
    assert all(e["entities"] and e["relationships"] for e in EPISODES)
    assert sum(len(e["entities"]) for e in EPISODES) == 68
    assert sum(len(e["relationships"]) for e in EPISODES) == 29


def test_every_expected_entity_is_named_in_its_episode():
    # A name the exchange never says could not be extracted: the list would be unfair.
    for i, e in enumerate(EPISODES, 1):
        text = f"{e['user']}\n{e['ai']}".lower()
        for entity in e["entities"]:
            spellings = [entity["name"], *entity.get("aliases", [])]
            assert any(re.search(re.escape(s.lower()), text) for s in spellings), (i, entity)


def test_every_expected_relationship_joins_expected_entities():
    for i, e in enumerate(EPISODES, 1):
        names = {entity["name"] for entity in e["entities"]}
        for r in e["relationships"]:
            assert {r["from"], r["to"]} <= names, (i, r)


def test_every_question_expects_memories_that_exist():
    titles = {m["title"] for m in FIXTURE["memories"]}
    assert len(titles) == len(FIXTURE["memories"]) == 12
    for q in FIXTURE["questions"]:
        assert q["expected"] and set(q["expected"]) <= titles


def _event(*entities: tuple[int, str, str], edges: tuple[tuple[int, int, str], ...] = ()):
    return graph_pb2.ExtractionEvent(
        status=graph_pb2.EXTRACTION_STATUS_DONE,
        parts=1,
        entities=[graph_pb2.Entity(id=i, name=n, type=t) for i, n, t in entities],
        relationships=[graph_pb2.Relationship(from_id=a, to_id=b, label=lb) for a, b, lb in edges],
    )


def test_scoring_matches_aliases_accents_and_either_direction():
    run = _runner()
    episode = EPISODES[2]  # Maya Lindqvist, React Native, React, Expo
    event = _event(
        (1, "maya", "person"),
        (2, "React-Native", "technology"),
        (3, "iOS", "technology"),
        edges=((2, 1, "used_by"), (3, 2, "runs")),
    )
    score = run.score_episode(2, episode, event)
    assert score.status == "DONE"
    assert score.found_entities == ["Maya Lindqvist", "React Native"]
    assert score.missed_entities == ["React", "Expo"]
    assert score.extra_entities == ["iOS (technology)"]
    assert score.found_relationships == ["Maya Lindqvist - React Native"]
    assert score.missed_relationships == ["Maya Lindqvist - React"]
    assert score.extracted_relationships == [
        "React-Native -used_by-> maya",
        "iOS -runs-> React-Native",
    ]

    accents = run.score_episode(7, EPISODES[7], _event((5, "Joao Pereira", "person")))
    assert accents.found_entities == ["João Pereira"]


def test_scoring_reports_a_wrong_type_and_counts_nothing_for_a_failed_episode():
    run = _runner()
    typed = run.score_episode(0, EPISODES[0], _event((1, "Tern", "technology")))
    assert typed.found_entities == ["Tern"]
    assert typed.wrong_types == ["Tern: technology, expected project"]

    failed = graph_pb2.ExtractionEvent(status=graph_pb2.EXTRACTION_STATUS_FAILED, error="cut off")
    score = run.score_episode(0, EPISODES[0], failed)
    assert score.status == "FAILED" and score.error == "cut off"
    assert score.found_entities == [] and len(score.missed_entities) == 4
    totals = run.extraction_totals([typed, score])
    assert totals["done"] == 1 and totals["failed"] == 1
    assert totals["entities_found"] == 1 and totals["entities_expected"] == 8
