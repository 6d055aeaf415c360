"""``nexus-grpc forget-user`` and ``nexus-grpc export-user``: a person's
data-erasure and data-access requests, made through the public API with the
operator's key (docs/privacy.md).

``forget-user`` asks ForgetUser, then follows WatchErasure with a progress
bar on stderr (episodes, sessions and memories erased against what the
erasure found at its start) and prints the receipt on stdout when it is
done: as text, or with ``--json`` as the Erasure message in protobuf's JSON
mapping. The erasure is durable work on the server: interrupting the command
does not stop it, and ``--no-wait`` prints the erasure as it starts and
returns (GetErasure reads it later). A request for a user whose erasure
runs joins it.

``export-user`` writes ExportUser's records as JSON Lines, one ExportRecord
a line, the export format of ``nexus-grpc export``, to a file or stdout, and
says on stderr how many records of each kind it wrote.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from typing import IO

from google.protobuf import json_format

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

#: Characters of the progress bar.
BAR = 30


def progress_line(erasure: memory_pb2.Erasure) -> str:
    """One line of progress: the phase, a bar of what went against what was
    found, and the counts."""
    planned, done = erasure.planned, erasure.counts
    whole = planned.episodes + planned.sessions + planned.memories
    went = (
        min(done.episodes, planned.episodes)
        + min(done.sessions, planned.sessions)
        + min(done.memories, planned.memories)
    )
    share = 1.0 if erasure.state == memory_pb2.ERASURE_STATE_DONE or not whole else went / whole
    filled = int(round(share * BAR))
    return (
        f"[{'#' * filled}{'.' * (BAR - filled)}] {share:4.0%} {erasure.phase:<9}"
        f" episodes {done.episodes}/{planned.episodes},"
        f" sessions {done.sessions}/{planned.sessions},"
        f" memories {done.memories}/{planned.memories}"
    )


def receipt_text(erasure: memory_pb2.Erasure) -> str:
    """The receipt as a person reads it: what went, by kind; never content."""
    who = f"user {erasure.user_id!r}" if erasure.user_id else "a user"
    scope = f"project {erasure.project_id}" if erasure.project_id else "every project"
    lines = [
        f"erasure {erasure.id} of {who} in tenant {erasure.tenant!r}, {scope}:"
        f" {memory_pb2.ErasureState.Name(erasure.state).removeprefix('ERASURE_STATE_').lower()}",
    ]
    if erasure.HasField("start_time"):
        lines.append(f"  started  {erasure.start_time.ToJsonString()}")
    if erasure.HasField("end_time"):
        lines.append(f"  finished {erasure.end_time.ToJsonString()}")
    for field in memory_pb2.ErasureCounts.DESCRIPTOR.fields:
        value = getattr(erasure.counts, field.name)
        if value:
            lines.append(f"  {field.name.replace('_', ' '):<22} {value}")
    return "\n".join(lines)


async def forget_user(
    client: NexusClient,
    user_id: str,
    project_id: int,
    *,
    wait: bool = True,
    as_json: bool = False,
    out: IO[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> memory_pb2.Erasure:
    """Forget ``user_id`` and return the receipt (or, without ``wait``, the
    erasure as it started)."""
    started = await client.forget_user(user_id=user_id, project_id=project_id)
    if started.joined and progress is not None:
        progress(f"joined erasure {started.id}, already running")
    erasure = started
    if wait:
        async for erasure in client.watch_erasure(id=started.id, timeout=None):
            if progress is not None:
                progress(progress_line(erasure))
            if erasure.state == memory_pb2.ERASURE_STATE_DONE:
                break
        if not erasure.user_id:
            erasure.user_id = user_id  # the caller named them
    out = sys.stdout if out is None else out
    if as_json:
        out.write(json_format.MessageToJson(erasure, preserving_proto_field_name=True) + "\n")
    else:
        out.write(receipt_text(erasure) + "\n")
    return erasure


async def export_user(
    client: NexusClient, user_id: str, project_id: int, out: IO[str]
) -> Counter[str]:
    """Write every record held about ``user_id`` as JSON Lines; counts by kind."""
    kinds: Counter[str] = Counter()
    async for record in client.export_user(user_id=user_id, project_id=project_id, timeout=None):
        kinds[record.WhichOneof("record") or "empty"] += 1
        out.write(
            json.dumps(
                json_format.MessageToDict(record, preserving_proto_field_name=True),
                ensure_ascii=False,
            )
            + "\n"
        )
    return kinds
