"""The ``retain:project`` worker: runs each due project's retention sweep
(``domain.retention``: what goes, and when the next run is due) in the
transaction that finishes its job."""

from __future__ import annotations

import functools
import time

from nexus_grpc.core.jobs import Job
from nexus_grpc.domain import retention
from nexus_grpc.workers.worker import Outcome


async def sweep_retention(batch: list[Job]) -> list[Outcome]:
    at = time.time()
    return [
        Outcome(job, write=functools.partial(retention.sweep, project_id=job.target_id, at=at))
        for job in batch
    ]
