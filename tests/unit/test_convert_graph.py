"""api/graph_convert.py, the graph's domain values as GraphService messages,
called directly: which enum each of the domain's names becomes (and what an
unknown one becomes), what an unset time or a missing episode leaves unset,
what a merge carries only for an export, and what an extraction event says
of its formation (its stage, its parts, the note when nothing was proposed or
operations were left out).

Whole-server tests keep the wiring (the messages the RPCs send):
tests/e2e/service/test_memory_formation.py and the graph's e2e files.
"""

from __future__ import annotations

from typing import Any

import pytest

from nexus_grpc.api import graph_convert
from nexus_grpc.core import graph as g
from nexus_grpc.core.graph import (
    Entity,
    EntityAlias,
    EntityMerge,
    Evidence,
    MergedSource,
    Relationship,
)
from nexus_grpc.core.records import EXTRACTION_DONE, EXTRACTION_FAILED, ExtractionEvent
from nexus_grpc.domain.extraction import entity_to_dict, rel_to_dict
from nexus_grpc.domain.graph import Subgraph
from nexus_grpc.domain.retrieval.hits import EntityHit, StageScore
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2

BASE = 1_700_000_000


def an_entity(**fields: Any) -> Entity:
    values = {
        "id": 1,
        "name": "Ada",
        "type": "person",
        "notes": None,
        "mention_count": 2,
        "confidence": 0.9,
        "source": g.SOURCE_EXTRACTION,
        "last_seen_at": None,
        "created_at": BASE,
        **fields,
    }
    return Entity(**values)


def a_relationship(**fields: Any) -> Relationship:
    values = {
        "id": 5,
        "from_id": 1,
        "to_id": 2,
        "label": "works_at",
        "notes": None,
        "mention_count": 1,
        "created_at": BASE,
        **fields,
    }
    return Relationship(**values)


def event(status: int = EXTRACTION_DONE, **payload: Any) -> ExtractionEvent:
    return ExtractionEvent(
        id=3, episode_id=4, session_id=5, project_id=6, status=status, error="",
        payload=payload, created_at=BASE,
    )  # fmt: skip


# Entities and relationships --------------------------------------------------


@pytest.mark.parametrize(
    ("source", "wire"),
    [
        (g.SOURCE_EXTRACTION, graph_pb2.ENTITY_SOURCE_EXTRACTION),
        (g.SOURCE_MANUAL, graph_pb2.ENTITY_SOURCE_MANUAL),
        ("import", graph_pb2.ENTITY_SOURCE_UNSPECIFIED),
    ],
)
def test_an_entitys_source_goes_out_as_its_enum_or_unspecified(source, wire):
    assert graph_convert.entity(an_entity(source=source)).source == wire


def test_an_entity_goes_out_with_its_names_and_unset_times_and_notes_empty():
    out = graph_convert.entity(an_entity(aliases=("Ada L.", "A. Lovelace"), project_id=3))
    assert (out.id, out.name, out.type, out.mention_count) == (1, "Ada", "person", 2)
    assert list(out.aliases) == ["Ada L.", "A. Lovelace"] and out.project_id == 3
    assert out.notes == "" and not out.HasField("last_seen_time")
    assert out.create_time.seconds == BASE
    assert not out.resolution_pending


def test_an_entity_awaiting_resolution_says_so():
    assert graph_convert.entity(an_entity(resolution=g.PENDING)).resolution_pending
    assert not graph_convert.entity(an_entity(resolution=g.RESOLVED)).resolution_pending


def test_a_time_keeps_its_fraction_and_an_unset_one_stays_unset():
    out = graph_convert.entity(an_entity(last_seen_at=BASE + 0.5))
    assert (out.last_seen_time.seconds, out.last_seen_time.nanos) == (BASE, 500_000_000)
    assert not graph_convert.entity(an_entity(created_at=0.0)).HasField("create_time")


def test_a_current_relationship_leaves_its_end_unset_and_no_episode_as_zero():
    out = graph_convert.relationship(a_relationship(valid_at=BASE))
    assert out.valid_time.seconds == BASE and not out.HasField("invalid_time")
    assert (out.asserted_episode_id, out.ended_episode_id, out.notes) == (0, 0, "")
    ended = graph_convert.relationship(
        a_relationship(valid_at=BASE, invalid_at=BASE + 60, asserted_by=7, ended_by=8, notes="n")
    )
    assert ended.invalid_time.seconds == BASE + 60
    assert (ended.asserted_episode_id, ended.ended_episode_id, ended.notes) == (7, 8, "n")


def test_evidence_says_whether_it_ended_the_fact():
    said = Evidence(id=1, from_id=1, to_id=2, label="l", kind=g.ASSERT, at=BASE)
    assert not graph_convert.evidence(said).ended
    assert graph_convert.evidence(said).episode_id == 0  # a manual upsert
    ended = Evidence(id=2, from_id=1, to_id=2, label="l", kind=g.END, at=BASE, episode_id=4)
    assert graph_convert.evidence(ended).ended and graph_convert.evidence(ended).episode_id == 4


@pytest.mark.parametrize(("method", "wire"), sorted(graph_convert.METHODS.items()))
def test_every_resolution_method_has_its_enum(method, wire):
    alias = EntityAlias(
        id=1, entity_id=2, name="Ada L.", norm="ada l", method=method, score=0.5,
        episode_id=None, created_at=BASE,
    )  # fmt: skip
    out = graph_convert.alias(alias)
    assert out.method == wire != graph_pb2.RESOLUTION_METHOD_UNSPECIFIED
    assert out.episode_id == 0


def test_the_methods_named_are_every_method_the_domain_has():
    assert set(graph_convert.METHODS) == set(g.METHODS)
    unknown = EntityAlias(1, 2, "x", "x", "guess", 0.5, None, BASE)
    assert graph_convert.alias(unknown).method == graph_pb2.RESOLUTION_METHOD_UNSPECIFIED


# Merges ----------------------------------------------------------------------


def a_merge(**fields: Any) -> EntityMerge:
    values = {
        "id": 9,
        "project_id": 1,
        "session_id": 0,
        "tenant": "t",
        "target_id": 1,
        "source_ids": (2, 3),
        "method": g.MERGE_LLM,
        "reason": "same person",
        "created_at": BASE,
        "target_notes": "before",
        "sources": (MergedSource(an_entity(id=2), alias_names=("A",), episode_ids=(4,)),),
        **fields,
    }
    return EntityMerge(**values)


def test_a_merge_carries_its_sources_and_the_targets_notes_only_for_an_export():
    listed = graph_convert.merge(a_merge())
    assert list(listed.source_ids) == [2, 3] and listed.method == graph_pb2.MERGE_METHOD_LLM
    assert list(listed.sources) == [] and listed.target_notes == ""
    assert not listed.HasField("undo_time")
    exported = graph_convert.merge(a_merge(), with_sources=True)
    assert exported.target_notes == "before"
    [source] = exported.sources
    assert source.entity.id == 2 and list(source.alias_names) == ["A"]
    assert list(source.episode_ids) == [4]
    no_notes = graph_convert.merge(a_merge(target_notes=None), with_sources=True)
    assert no_notes.target_notes == ""


def test_a_merges_method_goes_out_as_its_enum_or_unspecified():
    assert graph_convert.merge(a_merge(method=g.MERGE_MANUAL)).method == (
        graph_pb2.MERGE_METHOD_MANUAL
    )
    assert graph_convert.merge(a_merge(method="other")).method == (
        graph_pb2.MERGE_METHOD_UNSPECIFIED
    )
    assert graph_convert.merge(a_merge(undone_at=BASE + 5)).undo_time.seconds == BASE + 5


def test_a_subgraph_and_a_hit_carry_their_entities():
    sub = graph_convert.subgraph(Subgraph(nodes=[an_entity()], edges=[a_relationship()]))
    assert [n.id for n in sub.nodes] == [1] and [e.id for e in sub.edges] == [5]
    hit = graph_convert.entity_hit(EntityHit(an_entity(), 0.5))
    assert hit.entity.id == 1 and not hit.HasField("explanation")
    explained = graph_convert.entity_hit(
        EntityHit(an_entity(), 0.5, explanation=(StageScore("keyword", 1, 1.0, ""),))
    )
    assert [s.stage for s in explained.explanation.stages] == ["keyword"]


# Extraction events -----------------------------------------------------------


def test_an_extraction_event_carries_what_was_found():
    payload = {
        "entities": [entity_to_dict(an_entity())],
        "relationships": [rel_to_dict(a_relationship())],
        "parts": 3,
        "llm_calls": 4,
    }
    out = graph_convert.extraction_event(event(**payload))
    assert out.status == graph_pb2.EXTRACTION_STATUS_DONE
    assert [e.name for e in out.entities] == ["Ada"]
    assert [r.label for r in out.relationships] == ["works_at"]
    assert (out.parts, out.llm_calls) == (3, 4)
    assert out.stage == graph_pb2.EXTRACTION_EVENT_STAGE_EXTRACTION
    assert not out.HasField("memory_formation")


def test_an_event_written_before_parts_were_counted_is_one_part_when_done_else_none():
    assert graph_convert.extraction_event(event(EXTRACTION_DONE)).parts == 1
    failed = graph_convert.extraction_event(event(EXTRACTION_FAILED))
    assert failed.parts == 0 and failed.status == graph_pb2.EXTRACTION_STATUS_FAILED
    assert graph_convert.extraction_event(event(99)).status == (
        graph_pb2.EXTRACTION_STATUS_UNSPECIFIED
    )


def test_a_failed_events_error_goes_out_with_a_urls_credentials_masked():
    failed = ExtractionEvent(
        3, 4, 5, 6, EXTRACTION_FAILED, "POST http://u:hunter2@llm:11434/api failed", {}, BASE
    )
    out = graph_convert.extraction_event(failed)
    assert "hunter2" not in out.error and "llm:11434/api failed" in out.error


def test_a_formation_event_is_of_the_formation_stage_with_its_operations():
    formed = {
        "operations": [
            {"action": "ADD", "content": "likes tea", "reason": "said so", "user_id": "u"},
            {"action": "SUPERSEDE", "memory_id": 4, "related_memory_id": 3},
            {"action": "RENAME"},
        ],
        "proposed": 3,
        "llm_calls": 2,
    }
    out = graph_convert.extraction_event(event(formation=formed))
    assert out.stage == graph_pb2.EXTRACTION_EVENT_STAGE_MEMORY_FORMATION
    outcome = out.memory_formation
    assert (outcome.proposed, outcome.llm_calls, outcome.note) == (3, 2, "")
    assert [op.action for op in outcome.operations] == [
        graph_pb2.MEMORY_ACTION_ADD,
        graph_pb2.MEMORY_ACTION_SUPERSEDE,
        graph_pb2.MEMORY_ACTION_UNSPECIFIED,
    ]
    add, supersede, _ = outcome.operations
    assert (add.content, add.reason, add.user_id) == ("likes tea", "said so", "u")
    assert (supersede.memory_id, supersede.related_memory_id) == (4, 3)


def test_a_formation_that_proposed_nothing_says_why():
    out = graph_convert.extraction_event(event(formation={"operations": [], "proposed": 0}))
    assert out.memory_formation.proposed == 0
    assert out.memory_formation.note.startswith("nothing proposed")
    # A failed one (not done) proposed nothing for another reason: no such note.
    failed = graph_convert.extraction_event(event(EXTRACTION_FAILED, formation={}))
    assert failed.memory_formation.note == ""


@pytest.mark.parametrize(("hidden", "words"), [(1, "1 operation on"), (2, "2 operations on")])
def test_operations_on_users_the_key_may_not_act_for_are_counted_not_shown(hidden, words):
    shown = [{"action": "ADD", "content": "x"}]
    out = graph_convert.extraction_event(
        event(formation={"operations": shown, "proposed": 1 + hidden, "note": "cut short"})
    )
    outcome = out.memory_formation
    assert outcome.proposed == 1 + hidden and len(outcome.operations) == 1
    assert outcome.note == (
        f"cut short; {words} memories of users this key may not act for left out"
    )


def test_an_event_from_before_proposed_was_recorded_proposed_what_it_shows():
    shown = [{"action": "ADD"}, {"action": "NOTHING"}]
    out = graph_convert.extraction_event(event(formation={"operations": shown}))
    assert out.memory_formation.proposed == 2 and out.memory_formation.note == ""
