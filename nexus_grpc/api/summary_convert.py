"""Summary conversions between wire (protobuf) and domain types."""

from __future__ import annotations

from nexus_grpc.api.convert import timestamp
from nexus_grpc.core.records import Summary
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2


def summary(s: Summary) -> summary_pb2.Summary:
    return summary_pb2.Summary(
        id=s.id,
        session_id=s.session_id,
        project_id=s.project_id,
        content=s.content,
        first_episode_id=s.first_episode_id,
        last_episode_id=s.last_episode_id,
        episode_count=s.episode_count,
        create_time=timestamp(s.created_at),
        update_time=timestamp(s.updated_at),
    )


def range_values(s: summary_pb2.Summary) -> dict[str, int]:
    return {
        "first_episode_id": s.first_episode_id,
        "last_episode_id": s.last_episode_id,
        "episode_count": s.episode_count,
    }
