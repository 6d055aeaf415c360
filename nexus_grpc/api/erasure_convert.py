"""Erasures and their receipts as messages (nexus.memory.v1.Erasure)."""

from __future__ import annotations

from dataclasses import fields

from nexus_grpc.api.convert import timestamp
from nexus_grpc.core.erasure import Counts, Erasure
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2


def counts(c: Counts) -> memory_pb2.ErasureCounts:
    return memory_pb2.ErasureCounts(**{f.name: getattr(c, f.name) for f in fields(c)})


def erasure(e: Erasure) -> memory_pb2.Erasure:
    return memory_pb2.Erasure(
        id=e.id,
        kind=memory_pb2.ErasureKind.ValueType(e.kind),
        user_id=e.user_id,
        project_id=e.project_id,
        tenant=e.tenant,
        state=memory_pb2.ErasureState.ValueType(e.state),
        phase=e.phase,
        counts=counts(e.counts),
        planned=counts(e.planned),
        start_time=timestamp(e.started_at),
        end_time=timestamp(e.finished_at),
        joined=e.joined,
        principal=e.principal,
    )
