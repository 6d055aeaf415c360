"""Conversion between GraphService wire types and the graph's domain types."""

from __future__ import annotations

from typing import Any

from nexus_grpc.api import convert
from nexus_grpc.api.convert import timestamp
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
from nexus_grpc.core.redact import scrub
from nexus_grpc.domain.extraction import entity_from_dict, rel_from_dict
from nexus_grpc.domain.graph import Subgraph
from nexus_grpc.domain.retrieval.hits import EntityHit
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2

_SOURCES = {
    g.SOURCE_EXTRACTION: graph_pb2.ENTITY_SOURCE_EXTRACTION,
    g.SOURCE_MANUAL: graph_pb2.ENTITY_SOURCE_MANUAL,
}
METHODS = {
    g.METHOD_NEW: graph_pb2.RESOLUTION_METHOD_NEW,
    g.METHOD_EXACT: graph_pb2.RESOLUTION_METHOD_EXACT,
    g.METHOD_CONTAINMENT: graph_pb2.RESOLUTION_METHOD_CONTAINMENT,
    g.METHOD_SHINGLE: graph_pb2.RESOLUTION_METHOD_SHINGLE,
    g.METHOD_LLM: graph_pb2.RESOLUTION_METHOD_LLM,
    g.METHOD_MERGE: graph_pb2.RESOLUTION_METHOD_MERGE,
    g.METHOD_MANUAL: graph_pb2.RESOLUTION_METHOD_MANUAL,
}
MERGE_METHODS = {
    g.MERGE_MANUAL: graph_pb2.MERGE_METHOD_MANUAL,
    g.MERGE_LLM: graph_pb2.MERGE_METHOD_LLM,
}
_STATUSES = {
    EXTRACTION_DONE: graph_pb2.EXTRACTION_STATUS_DONE,
    EXTRACTION_FAILED: graph_pb2.EXTRACTION_STATUS_FAILED,
}


def _ts(seconds: float | None) -> Any:  # Timestamp fields, or None
    """A Timestamp as constructor fields: a neighborhood converts ~500 of these per
    call, and fields are a third cheaper than building Timestamp messages."""
    if not seconds:
        return None
    whole = int(seconds)
    return {"seconds": whole, "nanos": int((seconds - whole) * 1e9)}


def entity(e: Entity) -> graph_pb2.Entity:
    return graph_pb2.Entity(
        id=e.id,
        name=e.name,
        type=e.type,
        notes=e.notes or "",
        mention_count=e.mention_count,
        confidence=e.confidence,
        source=_SOURCES.get(e.source, graph_pb2.ENTITY_SOURCE_UNSPECIFIED),
        last_seen_time=_ts(e.last_seen_at),
        create_time=_ts(e.created_at),
        project_id=e.project_id,
        session_id=e.session_id,
        aliases=list(e.aliases),
        resolution_pending=e.resolution == g.PENDING,
    )


def relationship(r: Relationship) -> graph_pb2.Relationship:
    return graph_pb2.Relationship(
        id=r.id,
        from_id=r.from_id,
        to_id=r.to_id,
        label=r.label,
        notes=r.notes or "",
        mention_count=r.mention_count,
        create_time=_ts(r.created_at),
        valid_time=_ts(r.valid_at),
        invalid_time=_ts(r.invalid_at),
        asserted_episode_id=r.asserted_by or 0,
        ended_episode_id=r.ended_by or 0,
    )


def alias(a: EntityAlias) -> graph_pb2.EntityAlias:
    return graph_pb2.EntityAlias(
        entity_id=a.entity_id,
        name=a.name,
        method=METHODS.get(a.method, graph_pb2.RESOLUTION_METHOD_UNSPECIFIED),
        score=a.score,
        episode_id=a.episode_id or 0,
        create_time=_ts(a.created_at),
    )


def merge(m: EntityMerge, *, with_sources: bool = False) -> graph_pb2.EntityMerge:
    """``with_sources``: what undoing needs too (ExportProject's record)."""
    return graph_pb2.EntityMerge(
        id=m.id,
        target_id=m.target_id,
        source_ids=list(m.source_ids),
        method=MERGE_METHODS.get(m.method, graph_pb2.MERGE_METHOD_UNSPECIFIED),
        reason=m.reason,
        create_time=_ts(m.created_at),
        undo_time=_ts(m.undone_at),
        project_id=m.project_id,
        session_id=m.session_id,
        sources=[merged_source(s) for s in m.sources] if with_sources else [],
        target_notes=(m.target_notes or "") if with_sources else "",
    )


def merged_source(s: MergedSource) -> graph_pb2.MergedSource:
    return graph_pb2.MergedSource(
        entity=entity(s.entity),
        alias_names=list(s.alias_names),
        episode_ids=list(s.episode_ids),
        shared_episode_ids=list(s.shared_episode_ids),
        evidence_from_ids=list(s.evidence_from),
        evidence_to_ids=list(s.evidence_to),
    )


def evidence(e: Evidence) -> graph_pb2.RelationshipEvidence:
    return graph_pb2.RelationshipEvidence(
        id=e.id,
        from_id=e.from_id,
        to_id=e.to_id,
        label=e.label,
        ended=e.kind == g.END,
        time=_ts(e.at),
        episode_id=e.episode_id or 0,
        mentions=e.mentions,
        notes=e.notes or "",
        create_time=_ts(e.created_at),
    )


def subgraph(g: Subgraph) -> graph_pb2.Subgraph:
    return graph_pb2.Subgraph(
        nodes=[entity(n) for n in g.nodes], edges=[relationship(r) for r in g.edges]
    )


def entity_hit(h: EntityHit) -> graph_pb2.EntityHit:
    return graph_pb2.EntityHit(
        entity=entity(h.entity),
        score=h.score,
        degraded_reason=scrub(h.degraded_reason),
        reranked=h.reranked,
        explanation=convert.explanation(h.explanation),
    )


def extraction_event(ev: ExtractionEvent) -> graph_pb2.ExtractionEvent:
    return graph_pb2.ExtractionEvent(
        event_id=ev.id,
        episode_id=ev.episode_id,
        session_id=ev.session_id,
        project_id=ev.project_id,
        status=_STATUSES.get(ev.status, graph_pb2.EXTRACTION_STATUS_UNSPECIFIED),
        error=scrub(ev.error),
        entities=[entity(entity_from_dict(d)) for d in ev.payload.get("entities", [])],
        relationships=[relationship(rel_from_dict(d)) for d in ev.payload.get("relationships", [])],
        time=timestamp(ev.created_at),
        parts=int(ev.payload.get("parts", 1 if ev.status == EXTRACTION_DONE else 0)),
        llm_calls=int(ev.payload.get("llm_calls", 0)),
        memory_formation=_formation(ev.payload.get("formation"), ev.status == EXTRACTION_DONE),
        stage=(
            graph_pb2.EXTRACTION_EVENT_STAGE_MEMORY_FORMATION
            if "formation" in ev.payload
            else graph_pb2.EXTRACTION_EVENT_STAGE_EXTRACTION
        ),
    )


_ACTIONS = {
    "ADD": graph_pb2.MEMORY_ACTION_ADD,
    "UPDATE": graph_pb2.MEMORY_ACTION_UPDATE,
    "SUPERSEDE": graph_pb2.MEMORY_ACTION_SUPERSEDE,
    "NOTHING": graph_pb2.MEMORY_ACTION_NOTHING,
}


def _formation(
    formed: dict[str, Any] | None, done: bool
) -> graph_pb2.MemoryFormationOutcome | None:
    if formed is None:
        return None
    shown = formed.get("operations", [])
    # Events written before "proposed" was recorded had one operation each.
    proposed = int(formed.get("proposed", len(shown)))
    notes = [formed["note"]] if formed.get("note") else []
    if done and proposed == 0 and not notes:
        notes.append(
            "nothing proposed: the exchange stated no lasting fact or preference this"
            " project forms memories of"
        )
    if done and proposed > len(shown):
        hidden = proposed - len(shown)
        notes.append(
            f"{hidden} operation{'s' if hidden != 1 else ''} on memories of users this key"
            " may not act for left out"
        )
    return graph_pb2.MemoryFormationOutcome(
        proposed=proposed,
        note="; ".join(notes),
        operations=[
            graph_pb2.MemoryOperation(
                action=_ACTIONS.get(op["action"], graph_pb2.MEMORY_ACTION_UNSPECIFIED),
                memory_id=op.get("memory_id", 0),
                related_memory_id=op.get("related_memory_id", 0),
                content=op.get("content", ""),
                reason=op.get("reason", ""),
                user_id=op.get("user_id", ""),
            )
            for op in shown
        ],
        llm_calls=int(formed.get("llm_calls", 0)),
    )
