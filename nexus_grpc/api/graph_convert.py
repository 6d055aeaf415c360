"""Conversion between GraphService wire types and the graph's domain types."""

from __future__ import annotations

from typing import Any

from nexus_grpc.api.convert import timestamp
from nexus_grpc.domain.extraction import entity_from_dict, rel_from_dict
from nexus_grpc.domain.graph import EntityHit, Subgraph
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.store import extraction_events as event_store
from nexus_grpc.store import graph as graph_store
from nexus_grpc.store.extraction_events import ExtractionEvent
from nexus_grpc.store.graph import Entity, Relationship

_SOURCES = {
    graph_store.SOURCE_EXTRACTION: graph_pb2.ENTITY_SOURCE_EXTRACTION,
    graph_store.SOURCE_MANUAL: graph_pb2.ENTITY_SOURCE_MANUAL,
}
_STATUSES = {
    event_store.DONE: graph_pb2.EXTRACTION_STATUS_DONE,
    event_store.FAILED: graph_pb2.EXTRACTION_STATUS_FAILED,
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
    )


def subgraph(g: Subgraph) -> graph_pb2.Subgraph:
    return graph_pb2.Subgraph(
        nodes=[entity(n) for n in g.nodes], edges=[relationship(r) for r in g.edges]
    )


def entity_hit(h: EntityHit) -> graph_pb2.EntityHit:
    return graph_pb2.EntityHit(entity=entity(h.entity), score=h.score)


def extraction_event(ev: ExtractionEvent) -> graph_pb2.ExtractionEvent:
    return graph_pb2.ExtractionEvent(
        event_id=ev.id,
        episode_id=ev.episode_id,
        session_id=ev.session_id,
        project_id=ev.project_id,
        status=_STATUSES.get(ev.status, graph_pb2.EXTRACTION_STATUS_UNSPECIFIED),
        error=ev.error,
        entities=[entity(entity_from_dict(d)) for d in ev.payload.get("entities", [])],
        relationships=[relationship(rel_from_dict(d)) for d in ev.payload.get("relationships", [])],
        time=timestamp(ev.created_at),
        parts=int(ev.payload.get("parts", 1 if ev.status == event_store.DONE else 0)),
    )
