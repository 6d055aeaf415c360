"""Conversion between wire (protobuf) and domain types, in one place."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.core import models
from nexus_grpc.core.records import Memory, MemoryUsage, Revision
from nexus_grpc.core.redact import scrub
from nexus_grpc.domain.memory_visibility import MemoryScope
from nexus_grpc.domain.retrieval.hits import EpisodeHit, MemoryHit, StageScore
from nexus_grpc.domain.selection import Selection
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.search.v1 import explanation_pb2
from nexus_grpc.runtime.loop_lag import LAG_BUCKETS, LoopLag


def timestamp(seconds: float | None) -> Timestamp | None:
    if not seconds:
        return None
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


# google.protobuf.Timestamp's valid range: 0001-01-01 to 9999-12-31 (UTC).
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_799


def time_field(message: Message, field: str) -> float | None:
    """A Timestamp field as epoch seconds, None when unset; one outside
    Timestamp's range (which json_format and other languages refuse) is
    INVALID_ARGUMENT naming the field."""
    if not message.HasField(field):
        return None
    ts: Timestamp = getattr(message, field)
    if not _MIN_SECONDS <= ts.seconds <= _MAX_SECONDS or not 0 <= ts.nanos < 1_000_000_000:
        raise InvalidArgument(
            f"{field} is not a valid timestamp (seconds {ts.seconds}, nanos {ts.nanos})",
            field=field,
        )
    return ts.seconds + ts.nanos / 1e9


def exact_timestamp(seconds: float) -> Timestamp:
    """Always set, the epoch included (``timestamp`` leaves 0 unset)."""
    ts = Timestamp()
    ts.FromNanoseconds(round(seconds * 1e9))
    return ts


def struct(value: dict[str, Any]) -> Struct:
    s = Struct()
    if value:
        s.update(value)
    return s


def from_struct(value: Struct, field: str = "metadata") -> dict[str, Any]:
    try:
        return json_format.MessageToDict(value) if value.fields else {}
    except ValueError as exc:  # NaN and infinities have no JSON form
        raise InvalidArgument(f"{field} must be JSON-representable: {exc}", field=field) from exc


def project(p: models.Project) -> memory_pb2.Project:
    return memory_pb2.Project(
        id=p.id,
        name=p.name,
        description=p.description,
        colour=p.colour,
        icon=p.icon,
        notes=p.notes,
        system_prompt=p.system_prompt,
        create_time=timestamp(p.created_at),
        update_time=timestamp(p.updated_at),
        retention=None if p.retention is None else _duration(p.retention),
        # Unset reads as unset (the proto says what that means).
        single_valued_labels=list(p.single_valued_labels or ()),
        memory_formation=memory_pb2.MemoryFormation.ValueType(p.memory_formation or 0),
        tenant=p.tenant,
    )


def _duration(seconds: float) -> Duration:
    d = Duration()
    d.FromNanoseconds(round(seconds * 1e9))
    return d


def project_values(p: memory_pb2.Project) -> dict[str, Any]:
    return {
        "name": p.name,
        "description": p.description,
        "colour": p.colour,
        "icon": p.icon,
        "notes": p.notes,
        "system_prompt": p.system_prompt,
        "retention": duration_field(p, "retention", "project"),
        "single_valued_labels": list(p.single_valued_labels),
        "memory_formation": p.memory_formation,
    }


def session(s: models.Session) -> memory_pb2.Session:
    return memory_pb2.Session(
        id=s.id,
        external_id=s.external_id,
        name=s.name,
        project_id=s.project_id,
        metadata=struct(s.metadata),
        create_time=timestamp(s.created_at),
        user_id=s.user_id,
        agent_id=s.agent_id,
    )


def episode(e: models.Episode) -> memory_pb2.Episode:
    return memory_pb2.Episode(
        id=e.id,
        session_id=e.session_id,
        user_message=e.user_message,
        ai_response=e.ai_response,
        metadata=struct(e.metadata),
        create_time=timestamp(e.created_at),
        embedding_state=memory_pb2.JobState.ValueType(e.embed_state),
        embedding_error=scrub(e.embed_error),
        extraction_state=memory_pb2.JobState.ValueType(e.extract_state),
        extraction_error=scrub(e.extract_error),
        occur_time=exact_timestamp(e.occur_at),
        memory_state=memory_pb2.JobState.ValueType(e.memory_state or 0),
        memory_error=scrub(e.memory_error),
    )


def search_mode(mode: int) -> models.SearchMode:
    if mode not in memory_pb2.SearchMode.values():
        raise InvalidArgument(f"mode {mode} is not a SearchMode", field="mode")
    return models.SearchMode(mode) if mode else models.SearchMode.HYBRID


def episode_hit(h: EpisodeHit) -> memory_pb2.SearchHit:
    return memory_pb2.SearchHit(
        episode=episode(h.episode),
        score=h.score,
        snippet=h.snippet,
        sources=[memory_pb2.SearchSource.ValueType(s) for s in h.sources],
        degraded_reason=scrub(h.degraded_reason),
        reranked=h.reranked,
        explanation=explanation(h.explanation),
    )


def explanation(stages: tuple[StageScore, ...]) -> explanation_pb2.Explanation | None:
    """A hit's ``explain`` answer; None (left unset) when the search did not ask."""
    if not stages:
        return None
    return explanation_pb2.Explanation(
        stages=[
            explanation_pb2.StageScore(stage=s.stage, rank=s.rank, score=s.score, note=s.note)
            for s in stages
        ]
    )


# Memories (PROJECT/USER) ---------------------------------------------------


def memory(m: Memory) -> memory_pb2.Memory:
    return memory_pb2.Memory(
        id=m.id,
        kind=memory_pb2.MemoryKind.ValueType(m.kind),
        title=m.title,
        content=m.content,
        tier=memory_pb2.Tier.ValueType(m.tier),
        project_id=m.project_id,
        agent_id=m.agent_id,
        user_id=m.user_id,
        session_id=m.session_id,
        confidence=m.confidence,
        metadata=struct(m.metadata),
        create_time=timestamp(m.created_at),
        update_time=timestamp(m.updated_at),
        last_used_time=timestamp(m.last_used_at),
        use_count=m.use_count,
        expire_time=None if m.expire_at is None else exact_timestamp(m.expire_at),
        source=_MEMORY_SOURCES.get(m.source, memory_pb2.MEMORY_SOURCE_UNSPECIFIED),
        source_episode_id=m.source_episode_id or 0,
    )


_MEMORY_SOURCES = {
    "client": memory_pb2.MEMORY_SOURCE_CLIENT,
    "formation": memory_pb2.MEMORY_SOURCE_FORMATION,
}


def memory_values(m: memory_pb2.Memory) -> dict[str, Any]:
    return {
        "kind": m.kind,
        "title": m.title,
        "content": m.content,
        "tier": m.tier,
        "project_id": m.project_id,
        "agent_id": m.agent_id,
        "user_id": m.user_id,
        "session_id": m.session_id,
        "confidence": m.confidence,
        "metadata": from_struct(m.metadata),
        "expire_time": time_field(m, "expire_time"),
        "ttl": duration_field(m, "ttl"),
    }


def duration_field(message: Message, field: str, owner: str = "memory") -> float | None:
    """A Duration field as seconds, None when unset; outside Duration's range
    (about 10,000 years) or with nanos of the other sign is INVALID_ARGUMENT."""
    if not message.HasField(field):
        return None
    d = getattr(message, field)
    if abs(d.seconds) > 315_576_000_000 or abs(d.nanos) > 999_999_999 or (d.seconds * d.nanos < 0):
        raise InvalidArgument(
            f"{owner}.{field} is not a valid duration (seconds {d.seconds}, nanos {d.nanos})",
            field=f"{owner}.{field}",
        )
    return d.seconds + d.nanos / 1e9


def memory_scope(s: memory_pb2.MemoryScope) -> MemoryScope:
    return MemoryScope(
        project_id=s.project_id,
        user_id=s.user_id,
        session_id=s.session_id,
        agent_id=s.agent_id,
        include_archived=s.include_archived,
    )


def memory_hit(h: MemoryHit) -> memory_pb2.MemoryHit:
    return memory_pb2.MemoryHit(
        memory=memory(h.memory),
        score=h.score,
        sources=[memory_pb2.SearchSource.ValueType(s) for s in h.sources],
        degraded_reason=scrub(h.degraded_reason),
        reranked=h.reranked,
        explanation=explanation(h.explanation),
    )


def selected_memory(s: Selection) -> memory_pb2.SelectedMemory:
    return memory_pb2.SelectedMemory(
        memory=memory(s.memory),
        relevance=s.relevance,
        category=memory_pb2.MemoryCategory.ValueType(s.category),
        previously_used=s.previously_used,
        method=s.method,
        degraded_reason=scrub(s.degraded_reason),
        title_batches=s.title_batches,
    )


def memory_usage(u: MemoryUsage) -> memory_pb2.MemoryUsage:
    return memory_pb2.MemoryUsage(
        id=u.id,
        time=timestamp(u.used_at),
        context=u.context,
        thread_id=u.thread_id,
        memory_id=u.memory_id,
        relevance=u.relevance,
        category=memory_pb2.MemoryCategory.ValueType(u.category),
    )


def event_loop(lag: LoopLag | None) -> memory_pb2.EventLoopStatus:
    if lag is None:
        return memory_pb2.EventLoopStatus()
    within_100ms = lag.bucket_counts[LAG_BUCKETS.index(0.1)]
    return memory_pb2.EventLoopStatus(
        samples=lag.samples,
        max_lag_ms=lag.max_seconds * 1000,
        over_100ms=lag.samples - within_100ms,
    )


def memory_revision(r: Revision) -> memory_pb2.MemoryRevision:
    return memory_pb2.MemoryRevision(
        id=r.id,
        memory_id=r.memory_id,
        change=memory_pb2.MemoryChange.ValueType(r.action),
        changed_fields=r.changed,
        previous=memory(r.previous),
        change_time=timestamp(r.changed_at),
        request_id=r.request_id,
        principal=r.principal,
        episode_id=r.episode_id or 0,
        reason=r.reason,
    )
