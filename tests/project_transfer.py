"""A project written out and read back through a real server, for the
export, import and restore tests: ``seed`` makes a project with some of
everything, ``cli`` runs the real ``nexus-grpc`` command, ``exported`` exports a
project with it, ``rows`` counts every table's rows, and ``normalized`` puts an
export's records in a form two servers' exports compare in (ids replaced by
positions, the fields a server assigns itself left out). Not a test module:
ExportProject and `import` (tests/e2e/service/test_export_project.py) and
RestoreProject (tests/e2e/service/test_restore_project.py) move the same
project and compare it the same way."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2

NEXUS = str(Path(sys.executable).with_name("nexus-grpc"))
BASE = 1_683_554_160  # 8 May 2023, 13:56 UTC
P, U = memory_pb2.MEMORY_KIND_PROJECT, memory_pb2.MEMORY_KIND_USER


def ts(seconds: float) -> Timestamp:
    t = Timestamp()
    t.FromNanoseconds(int(seconds * 1e9))
    return t


async def cli(*args: str) -> subprocess.CompletedProcess:
    """The real command, in its own process."""
    return await asyncio.to_thread(
        subprocess.run, [NEXUS, *args], capture_output=True, text=True, timeout=120
    )


async def seed(h, marker: str) -> int:
    """A project with some of everything; returns its id."""
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(
            project=memory_pb2.Project(
                name=f"{marker} project", description="d", notes="n", icon="i"
            )
        )
    )
    sessions = []
    for i in range(2):
        session = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(
                session=memory_pb2.Session(
                    name=f"{marker} s{i}", project_id=project.id, metadata={"n": i}
                )
            )
        )
        sessions.append(session.id)
    episodes = []
    for i in range(6):
        ep = await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=sessions[i % 2],
                user_message=f"{marker} question {i}",
                ai_response=f"answer {i}",
                metadata={"turn": i},
                occur_time=ts(BASE + 60 * i),
            )
        )
        episodes.append(ep.id)
    edited = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=P, project_id=project.id, title="deploy", content="friday"
            )
        )
    )
    await h.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=edited.id, title="deploys"),
            update_mask=FieldMask(paths=["title"]),
        )
    )
    await h.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=edited.id, content="tuesday", tier=memory_pb2.TIER_ARCHIVE),
            update_mask=FieldMask(paths=["content", "tier"]),
        )
    )
    for user in ("alice", "bob"):
        await h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=U,
                    user_id=user,
                    project_id=project.id,
                    title=f"{user} likes",
                    content="tea",
                )
            )
        )
    await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=P,
                project_id=project.id,
                session_id=sessions[0],
                tier=memory_pb2.TIER_TASK,
                title="task note",
                content="ship it",
                expire_time=ts(4_102_444_800),
            )
        )
    )
    a = await h.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name=f"{marker} Ada", type="person", project_id=project.id)
    )
    b = await h.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(
            name="Postgres", type="technology", notes="db", project_id=project.id
        )
    )
    await h.graph.UpsertRelationship(
        graph_pb2.UpsertRelationshipRequest(
            from_id=a.id, to_id=b.id, label="maintains", notes="since 2020"
        )
    )
    await h.summary.CreateSummary(
        summary_pb2.CreateSummaryRequest(
            summary=summary_pb2.Summary(
                session_id=sessions[0],
                content=f"{marker} they talked",
                first_episode_id=episodes[0],
                last_episode_id=episodes[4],
                episode_count=3,
            )
        )
    )
    await h.summary.CreateSummary(
        summary_pb2.CreateSummaryRequest(
            summary=summary_pb2.Summary(project_id=project.id, content="overview")
        )
    )
    return project.id


# What the receiving server assigns itself, and is left out of the comparison.
ASSIGNED = {
    "create_time",
    "update_time",
    "last_seen_time",
    "last_used_time",
    "change_time",
    "request_id",
    "principal",
    "use_count",
    "mention_count",
    "embedding_state",
    "embedding_error",
    "extraction_state",
    "extraction_error",
}
# How the graph came to be (aliases and how each was resolved, which episodes
# said what, merges): only a restore carries it; `nexus-grpc import` writes
# through the public API, where the receiving server records its own.
GRAPH_HISTORY = {"entity_alias", "entity_episode", "relationship_evidence", "entity_merge"}
# Reference fields, by the kind of record they name.
REFERENCES = {
    "session_id": "session",
    "project_id": "project",
    "memory_id": "memory",
    "from_id": "entity",
    "to_id": "entity",
    "first_episode_id": "episode",
    "last_episode_id": "episode",
}


def normalized(lines: list[str], assigned: set[str] = ASSIGNED) -> list[tuple[str, dict]]:
    """Each record with every id replaced by the position of its row among
    the export's rows of that kind, and the ``assigned`` fields left out."""
    records = [json.loads(line) for line in lines]
    order: dict[str, dict[str, int]] = {}
    for record in records:
        [(kind, body)] = record.items()
        if kind in GRAPH_HISTORY:
            continue
        seen = order.setdefault(kind, {})
        seen[body["id"]] = len(seen)

    def clean(kind: str, body: dict) -> dict:
        out = {}
        for key, value in body.items():
            if key in assigned:
                continue
            if key == "id":
                out[key] = order[kind][value]
            elif key in REFERENCES and value not in ("0", 0):
                out[key] = order[REFERENCES[key]][value]
            elif key == "previous":
                out[key] = clean("memory", value)
            else:
                out[key] = value
        return out

    return [
        (k, clean(k, b)) for record in records for k, b in record.items() if k not in GRAPH_HISTORY
    ]


TABLES = (
    "projects",
    "sessions",
    "episodes",
    "memories",
    "memory_history",
    "entities",
    "relationships",
    "summaries",
)


async def rows(h) -> dict[str, int]:
    """Every table's row count, and the graph's mention counters' sum (an
    entity or relationship upserted again counts one more mention)."""

    def read(c):
        got = {t: c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
        for t in ("entities", "relationships"):
            got[f"{t} mentions"] = c.execute(
                f"SELECT COALESCE(SUM(mention_count), 0) FROM {t}"
            ).fetchone()[0]
        return got

    return await h.app.db.read_sql(read)


async def exported(h, project_id: int, path: Path) -> list[str]:
    done = await cli("export", str(project_id), "-o", str(path), "--target", h.target)
    assert done.returncode == 0, done.stderr
    return (await asyncio.to_thread(path.read_text)).splitlines()
