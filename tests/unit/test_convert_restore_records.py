"""api/restore_convert.py, RestoreProject's records read into the domain's
values, called directly: each kind of record comes back as the value
ExportProject's conversions (api/convert.py, api/graph_convert.py,
api/summary_convert.py) sent out, but for what a restore decides afresh (an
episode's jobs, an alias's key, the tenant); an empty record, a memory with a
ttl and a malformed time are refused naming the record's field.

The servicer's own part (api/memory_servicer.py's RestoreProject and
_export_record) imports the whole app, so it is not called here; the wiring
(a file exported and restored over the wire, a refused record's number in the
answer) stays in tests/e2e/service/test_restore_project.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.api import convert, graph_convert, restore_convert, summary_convert
from nexus_grpc.core import graph as g
from nexus_grpc.core.graph import (
    Entity,
    EntityAlias,
    EntityEpisode,
    EntityMerge,
    Evidence,
    MergedSource,
    Relationship,
)
from nexus_grpc.core.models import Episode, JobState, Project, Session
from nexus_grpc.core.records import Memory, Revision, Summary
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

BASE = 1_700_000_000.5


def restored(**record: Any) -> Any:
    return restore_convert.record(memory_pb2.ExportRecord(**record))


def refusal(**record: Any) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as err:
        restored(**record)
    return err.value


def an_entity(**fields: Any) -> Entity:
    values = {
        "id": 1, "name": "Ada", "type": "person", "notes": "n", "mention_count": 2,
        "confidence": 0.5, "source": g.SOURCE_MANUAL, "last_seen_at": BASE + 1,
        "created_at": BASE, "project_id": 3, "session_id": 0, "aliases": ("A.",),
        "resolution": g.PENDING, **fields,
    }  # fmt: skip
    return Entity(**values)


def a_memory(**fields: Any) -> Memory:
    values = {
        "id": 7, "kind": 2, "title": "t", "content": "c", "tier": 3, "project_id": 3,
        "agent_id": "a", "user_id": "u", "session_id": 4, "confidence": 0.5,
        "metadata": {"k": "v"}, "created_at": BASE, "updated_at": BASE + 1,
        "last_used_at": BASE + 2, "use_count": 3, "expire_at": BASE + 3,
        "source": "formation", "source_episode_id": 11, **fields,
    }  # fmt: skip
    return Memory(**values)


# Each kind comes back as it went out ------------------------------------------


def test_a_project_comes_back_as_it_went_out_without_its_tenant():
    p = Project(
        id=1, name="p", description="d", colour="c", icon="i", notes="n", system_prompt="s",
        created_at=BASE, updated_at=BASE + 1, retention=3600.0,
        single_valued_labels=("works_at",), memory_formation=2, tenant="t1",
    )  # fmt: skip
    back = restored(project=convert.project(p))
    labels = tuple(back.single_valued_labels or ())
    assert dataclasses.replace(back, single_valued_labels=labels) == dataclasses.replace(
        p, tenant=""
    )


def test_a_session_comes_back_as_it_went_out():
    s = Session(
        id=2, external_id="e", name="n", project_id=1, metadata={"k": [1]}, created_at=BASE,
        user_id="u", agent_id="a",
    )  # fmt: skip
    assert restored(session=convert.session(s)) == s


def test_an_episode_comes_back_with_its_text_and_times_and_its_jobs_to_do_again():
    e = Episode(
        id=3, session_id=2, user_message="u", ai_response="a", metadata={"k": 1},
        created_at=BASE, occur_at=BASE - 60, embed_state=JobState.FAILED,
        embed_error="down", extract_state=JobState.PENDING,
    )  # fmt: skip
    back = restored(episode=convert.episode(e))
    # Its vector is embedded again; its graph rows come in the file.
    assert back == dataclasses.replace(
        e, embed_state=JobState.PENDING, embed_error="", extract_state=JobState.DONE
    )


def test_a_memory_comes_back_as_it_went_out():
    m = a_memory()
    assert restored(memory=convert.memory(m)) == m
    plain = a_memory(last_used_at=None, expire_at=None, source="client", source_episode_id=None)
    assert restored(memory=convert.memory(plain)) == plain


def test_a_revision_comes_back_with_the_memory_as_it_was():
    r = Revision(
        id=1, memory_id=7, action=memory_pb2.MEMORY_CHANGE_UPDATE, changed=["content"],
        previous=a_memory(content="old"), request_id="r", principal="ops",
        changed_at=BASE, purge_after=None, episode_id=5, reason="why",
    )  # fmt: skip
    assert restored(memory_revision=convert.memory_revision(r)) == r
    no_episode = dataclasses.replace(r, episode_id=None)
    assert restored(memory_revision=convert.memory_revision(no_episode)) == no_episode


@pytest.mark.parametrize("resolution", [g.PENDING, g.RESOLVED])
@pytest.mark.parametrize("source", [g.SOURCE_MANUAL, g.SOURCE_EXTRACTION])
def test_an_entity_comes_back_as_it_went_out(source, resolution):
    e = an_entity(source=source, resolution=resolution)
    assert restored(entity=graph_convert.entity(e)) == e
    bare = an_entity(notes=None, last_seen_at=None, aliases=())
    assert restored(entity=graph_convert.entity(bare)) == bare


def test_a_relationship_comes_back_as_it_went_out():
    r = Relationship(
        id=5, from_id=1, to_id=2, label="works_at", notes="n", mention_count=2,
        created_at=BASE, valid_at=BASE + 1, invalid_at=BASE + 2, asserted_by=3, ended_by=4,
    )  # fmt: skip
    assert restored(relationship=graph_convert.relationship(r)) == r
    current = dataclasses.replace(r, notes=None, invalid_at=None, asserted_by=None, ended_by=None)
    assert restored(relationship=graph_convert.relationship(current)) == current


@pytest.mark.parametrize("method", g.METHODS)
def test_an_alias_comes_back_with_its_method_and_its_key_left_to_the_restore(method):
    a = EntityAlias(
        id=8, entity_id=1, name="Ada L.", norm="ada l", method=method, score=0.5,
        episode_id=4, created_at=BASE,
    )  # fmt: skip
    assert restored(entity_alias=graph_convert.alias(a)) == dataclasses.replace(a, id=0, norm="")


def test_an_episode_link_and_evidence_come_back_as_they_went_out():
    link = restored(entity_episode=graph_pb2.EntityEpisode(entity_id=1, episode_id=2))
    assert link == EntityEpisode(1, 2)
    for kind in (g.ASSERT, g.END):
        ev = Evidence(
            id=1, from_id=1, to_id=2, label="l", kind=kind, at=BASE, episode_id=3, mentions=2,
            notes="n", created_at=BASE + 1,
        )  # fmt: skip
        assert restored(relationship_evidence=graph_convert.evidence(ev)) == ev
    manual = Evidence(id=2, from_id=1, to_id=2, label="l", kind=g.ASSERT, at=BASE)
    assert restored(relationship_evidence=graph_convert.evidence(manual)) == manual


@pytest.mark.parametrize("method", [g.MERGE_MANUAL, g.MERGE_LLM])
def test_a_merge_comes_back_with_its_sources_and_the_targets_notes(method):
    m = EntityMerge(
        id=9, project_id=1, session_id=0, tenant="t1", target_id=1, source_ids=(2, 3),
        method=method, reason="same", created_at=BASE, undone_at=BASE + 5,
        target_notes="before",
        sources=(
            MergedSource(
                an_entity(id=2), alias_names=("A",), episode_ids=(4,),
                shared_episode_ids=(5,), evidence_from=(6,), evidence_to=(7,),
            ),
        ),
    )  # fmt: skip
    back = restored(entity_merge=graph_convert.merge(m, with_sources=True))
    assert back == dataclasses.replace(m, tenant="")


def test_a_summary_comes_back_as_it_went_out():
    s = Summary(
        id=1, session_id=2, project_id=3, content="c", first_episode_id=4, last_episode_id=6,
        episode_count=3, created_at=BASE, updated_at=BASE + 1,
    )  # fmt: skip
    assert restored(summary=summary_convert.summary(s)) == s


def test_an_unknown_enum_is_kept_as_its_number_for_the_domain_to_refuse():
    alias = restored(entity_alias=graph_pb2.EntityAlias(entity_id=1, name="x", method=99))
    assert alias.method == "99"
    entity = restored(entity=graph_pb2.Entity(name="x", source=42))
    assert entity.source == "42"
    merge = restored(entity_merge=graph_pb2.EntityMerge(target_id=1, method=77))
    assert merge.method == "77"


def test_an_unset_time_is_zero_for_the_domain_to_decide_and_an_optional_one_none():
    entity = restored(entity=graph_pb2.Entity(name="x"))
    assert entity.created_at == 0.0 and entity.last_seen_at is None
    memory = restored(memory=memory_pb2.Memory(title="t"))
    assert memory.created_at == 0.0 and memory.expire_at is None and memory.source == "client"


# Refusals --------------------------------------------------------------------


def test_an_empty_record_is_refused():
    e = refusal()
    assert e.field == "record"
    assert e.message == "record is empty: exactly one of its fields must be set"


def test_a_memory_with_a_ttl_is_refused_naming_where_it_sits():
    ttl = Duration(seconds=60)
    e = refusal(memory=memory_pb2.Memory(ttl=ttl))
    assert e.field == "memory.ttl"
    assert e.message == "memory.ttl is for CreateMemory; a restore takes expire_time"
    previous = memory_pb2.MemoryRevision(previous=memory_pb2.Memory(ttl=ttl))
    assert refusal(memory_revision=previous).field == "memory_revision.previous.ttl"


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"session": memory_pb2.Session(create_time=Timestamp(nanos=-1))}, "session.create_time"),
        ({"episode": memory_pb2.Episode(occur_time=Timestamp(seconds=-(10**12)))},
         "episode.occur_time"),
        ({"memory": memory_pb2.Memory(expire_time=Timestamp(nanos=-1))}, "memory.expire_time"),
        ({"entity": graph_pb2.Entity(last_seen_time=Timestamp(nanos=-1))},
         "entity.last_seen_time"),
        ({"relationship": graph_pb2.Relationship(invalid_time=Timestamp(nanos=-1))},
         "relationship.invalid_time"),
        ({"entity_merge": graph_pb2.EntityMerge(undo_time=Timestamp(nanos=-1))},
         "entity_merge.undo_time"),
    ],
)  # fmt: skip
def test_a_malformed_time_is_refused_naming_the_records_field(record, field):
    e = refusal(**record)
    assert e.field == field
    assert e.message.startswith(f"{field} is not a valid timestamp")


def test_malformed_metadata_and_retention_are_refused_naming_the_records_field():
    s = memory_pb2.Session()
    s.metadata.update({"x": float("nan")})
    assert refusal(session=s).field == "session.metadata"
    p = memory_pb2.Project(name="p", retention=Duration(seconds=5, nanos=-1))
    assert refusal(project=p).field == "project.retention"
