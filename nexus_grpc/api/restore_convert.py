"""RestoreProject's records, from the wire to the domain's types: the
inverse of ExportProject's conversions (api/convert.py and its siblings)."""

from __future__ import annotations

from google.protobuf.message import Message

from nexus_grpc.api.convert import from_struct, project_values, time_field
from nexus_grpc.api.graph_convert import MERGE_METHODS, METHODS
from nexus_grpc.core.graph import (
    ASSERT,
    END,
    PENDING,
    RESOLVED,
    SOURCE_EXTRACTION,
    SOURCE_MANUAL,
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
from nexus_grpc.domain.export import ExportItem
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2

_SOURCES = {
    graph_pb2.ENTITY_SOURCE_EXTRACTION: SOURCE_EXTRACTION,
    graph_pb2.ENTITY_SOURCE_MANUAL: SOURCE_MANUAL,
}
_METHODS = {wire: name for name, wire in METHODS.items()}
_MERGE_METHODS = {wire: name for name, wire in MERGE_METHODS.items()}


def _time(message: Message, name: str, owner: str) -> float:
    """A time field as epoch seconds; 0 when unset (the domain decides)."""
    try:
        return time_field(message, name) or 0.0
    except InvalidArgument as exc:
        raise InvalidArgument(f"{owner}.{exc.message}", field=f"{owner}.{name}") from None


def _optional_time(message: Message, name: str, owner: str) -> float | None:
    return _time(message, name, owner) or None


def record(r: memory_pb2.ExportRecord) -> ExportItem:
    kind = r.WhichOneof("record")
    if kind is None:
        raise InvalidArgument(
            "record is empty: exactly one of its fields must be set", field="record"
        )
    if kind == "project":
        return _project(r.project)
    if kind == "session":
        return _session(r.session)
    if kind == "episode":
        return _episode(r.episode)
    if kind == "memory":
        return _memory(r.memory, "memory")
    if kind == "memory_revision":
        return _revision(r.memory_revision)
    if kind == "entity":
        return _entity(r.entity)
    if kind == "relationship":
        return _relationship(r.relationship)
    if kind == "entity_alias":
        return _alias(r.entity_alias)
    if kind == "entity_episode":
        return EntityEpisode(r.entity_episode.entity_id, r.entity_episode.episode_id)
    if kind == "relationship_evidence":
        return _evidence(r.relationship_evidence)
    if kind == "entity_merge":
        return _merge(r.entity_merge)
    return _summary(r.summary)


def _session(s: memory_pb2.Session) -> Session:
    return Session(
        id=s.id,
        external_id=s.external_id,
        name=s.name,
        project_id=s.project_id,
        metadata=from_struct(s.metadata, "session.metadata"),
        created_at=_time(s, "create_time", "session"),
        user_id=s.user_id,
        agent_id=s.agent_id,
    )


def _episode(e: memory_pb2.Episode) -> Episode:
    return Episode(
        id=e.id,
        session_id=e.session_id,
        user_message=e.user_message,
        ai_response=e.ai_response,
        metadata=from_struct(e.metadata, "episode.metadata"),
        created_at=_time(e, "create_time", "episode"),
        occur_at=_time(e, "occur_time", "episode"),
        embed_state=JobState.PENDING,
        extract_state=JobState.DONE,
    )


def _revision(m: memory_pb2.MemoryRevision) -> Revision:
    return Revision(
        id=m.id,
        memory_id=m.memory_id,
        action=m.change,
        changed=list(m.changed_fields),
        previous=_memory(m.previous, "memory_revision.previous"),
        request_id=m.request_id,
        principal=m.principal,
        changed_at=_time(m, "change_time", "memory_revision"),
        purge_after=None,
        episode_id=m.episode_id or None,
        reason=m.reason,
    )


def _relationship(rel: graph_pb2.Relationship) -> Relationship:
    return Relationship(
        id=rel.id,
        from_id=rel.from_id,
        to_id=rel.to_id,
        label=rel.label,
        notes=rel.notes or None,
        mention_count=rel.mention_count,
        created_at=_time(rel, "create_time", "relationship"),
        valid_at=_optional_time(rel, "valid_time", "relationship"),
        invalid_at=_optional_time(rel, "invalid_time", "relationship"),
        asserted_by=rel.asserted_episode_id or None,
        ended_by=rel.ended_episode_id or None,
    )


def _alias(a: graph_pb2.EntityAlias) -> EntityAlias:
    return EntityAlias(
        id=0,
        entity_id=a.entity_id,
        name=a.name,
        norm="",
        method=_METHODS.get(a.method, str(a.method)),
        score=a.score,
        episode_id=a.episode_id or None,
        created_at=_time(a, "create_time", "entity_alias"),
    )


def _evidence(ev: graph_pb2.RelationshipEvidence) -> Evidence:
    return Evidence(
        id=ev.id,
        from_id=ev.from_id,
        to_id=ev.to_id,
        label=ev.label,
        kind=END if ev.ended else ASSERT,
        at=_time(ev, "time", "relationship_evidence"),
        episode_id=ev.episode_id or None,
        mentions=ev.mentions,
        notes=ev.notes or None,
        created_at=_time(ev, "create_time", "relationship_evidence"),
    )


def _merge(m: graph_pb2.EntityMerge) -> EntityMerge:
    return EntityMerge(
        id=m.id,
        project_id=m.project_id,
        session_id=m.session_id,
        tenant="",
        target_id=m.target_id,
        source_ids=tuple(m.source_ids),
        method=_MERGE_METHODS.get(m.method, str(m.method)),
        reason=m.reason,
        created_at=_time(m, "create_time", "entity_merge"),
        undone_at=_optional_time(m, "undo_time", "entity_merge"),
        target_notes=m.target_notes or None,
        sources=tuple(
            MergedSource(
                entity=_entity(s.entity),
                alias_names=tuple(s.alias_names),
                episode_ids=tuple(s.episode_ids),
                shared_episode_ids=tuple(s.shared_episode_ids),
                evidence_from=tuple(s.evidence_from_ids),
                evidence_to=tuple(s.evidence_to_ids),
            )
            for s in m.sources
        ),
    )


def _project(p: memory_pb2.Project) -> Project:
    return Project(
        id=p.id,
        created_at=_time(p, "create_time", "project"),
        updated_at=_time(p, "update_time", "project"),
        # The fields CreateProject reads, read as it reads them (a malformed
        # retention Duration is refused).
        **project_values(p),
    )


def _memory(m: memory_pb2.Memory, owner: str) -> Memory:
    if m.HasField("ttl"):
        raise InvalidArgument(
            f"{owner}.ttl is for CreateMemory; a restore takes expire_time", field=f"{owner}.ttl"
        )
    return Memory(
        id=m.id,
        kind=m.kind,
        title=m.title,
        content=m.content,
        tier=m.tier,
        project_id=m.project_id,
        agent_id=m.agent_id,
        user_id=m.user_id,
        session_id=m.session_id,
        confidence=m.confidence,
        metadata=from_struct(m.metadata, f"{owner}.metadata"),
        created_at=_time(m, "create_time", owner),
        updated_at=_time(m, "update_time", owner),
        last_used_at=_optional_time(m, "last_used_time", owner),
        use_count=m.use_count,
        expire_at=_optional_time(m, "expire_time", owner),
        source="formation" if m.source == memory_pb2.MEMORY_SOURCE_FORMATION else "client",
        source_episode_id=m.source_episode_id or None,
    )


def _entity(e: graph_pb2.Entity) -> Entity:
    return Entity(
        id=e.id,
        name=e.name,
        type=e.type,
        notes=e.notes or None,
        mention_count=e.mention_count,
        confidence=e.confidence,
        source=_SOURCES.get(e.source, str(e.source)),
        last_seen_at=_optional_time(e, "last_seen_time", "entity"),
        created_at=_time(e, "create_time", "entity"),
        project_id=e.project_id,
        session_id=e.session_id,
        aliases=tuple(e.aliases),
        resolution=PENDING if e.resolution_pending else RESOLVED,
    )


def _summary(s: summary_pb2.Summary) -> Summary:
    return Summary(
        id=s.id,
        session_id=s.session_id,
        project_id=s.project_id,
        content=s.content,
        first_episode_id=s.first_episode_id,
        last_episode_id=s.last_episode_id,
        episode_count=s.episode_count,
        created_at=_time(s, "create_time", "summary"),
        updated_at=_time(s, "update_time", "summary"),
    )
