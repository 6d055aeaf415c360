"""``nexus-grpc export`` and ``nexus-grpc import``: move a project between servers.

Export writes ``ExportProject``'s records as JSON Lines, one ``ExportRecord``
a line (protobuf's JSON mapping with the proto's field names). Import reads
such a file into a server through the public API, as a client would, so it
runs under the importing key's tenant and rules:

- the project and its sessions are created anew (sessions keep their
  ``external_id``, so importing twice into one server is refused for them);
- episodes go through ``ImportEpisodes`` with their ``occur_time`` and a
  ``request_id`` derived from the exported id (``import-<id>``), up to 10,000
  a call;
- each memory is created as the oldest version its history holds, then each
  later version is applied with ``UpdateMemory`` and the fields that changed,
  so its history reads the same versions and changed fields;
- entities and relationships are upserted into the new project's graph, and
  summaries are created with their episode range mapped to the new ids.

What the receiving server assigns is its own: ids, create/update times, the
time, request id and principal of each history entry, and usage and mention
counters (a relationship or entity starts at one mention).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from google.protobuf import field_mask_pb2, json_format

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2

#: Episodes per ImportEpisodes call (the server's limit).
IMPORT_CALL = 10_000


async def export_project(client: NexusClient, project_id: int, out: IO[str]) -> dict[str, int]:
    """Write the project's records to ``out``; returns how many of each kind."""
    counts: dict[str, int] = {}
    async for record in client.export_project(project_id=project_id, timeout=None):
        kind = record.WhichOneof("record") or "?"
        counts[kind] = counts.get(kind, 0) + 1
        out.write(json.dumps(record_to_json(record), separators=(",", ":")) + "\n")
    return counts


def record_to_json(record: memory_pb2.ExportRecord) -> dict[str, Any]:
    return json_format.MessageToDict(record, preserving_proto_field_name=True)


def read_records(lines: Iterable[str]) -> Iterator[memory_pb2.ExportRecord]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield json_format.ParseDict(json.loads(line), memory_pb2.ExportRecord())
        except (ValueError, json_format.ParseError) as exc:
            raise ValueError(f"line {number}: not an ExportRecord: {exc}") from exc


@dataclass
class _Import:
    client: NexusClient
    project_id: int = 0
    sessions: dict[int, int] = field(default_factory=dict)
    episodes: dict[int, int] = field(default_factory=dict)
    entities: dict[int, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    pending_episodes: list[memory_pb2.Episode] = field(default_factory=list)
    pending_memory: memory_pb2.Memory | None = None
    pending_revisions: list[memory_pb2.MemoryRevision] = field(default_factory=list)

    def count(self, kind: str, n: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + n

    async def add(self, record: memory_pb2.ExportRecord) -> None:
        kind = record.WhichOneof("record")
        if kind != "episode":
            await self.flush_episodes()
        if kind != "memory_revision":
            await self.flush_memory()
        if kind == "project":
            await self.project(record.project)
        elif kind == "session":
            await self.session(record.session)
        elif kind == "episode":
            self.pending_episodes.append(record.episode)
            if len(self.pending_episodes) >= IMPORT_CALL:
                await self.flush_episodes()
        elif kind == "memory":
            self.pending_memory = record.memory
        elif kind == "memory_revision":
            if self.pending_memory is None:
                raise ValueError("a memory_revision comes before any memory")
            self.pending_revisions.append(record.memory_revision)
        elif kind == "entity":
            await self.entity(record.entity)
        elif kind == "relationship":
            await self.relationship(record.relationship)
        elif kind == "summary":
            await self.summary(record.summary)
        else:
            raise ValueError("an empty ExportRecord")

    async def finish(self) -> None:
        await self.flush_episodes()
        await self.flush_memory()

    def _project(self) -> int:
        if not self.project_id:
            raise ValueError("the file must begin with its project record")
        return self.project_id

    async def project(self, p: memory_pb2.Project) -> None:
        if self.project_id:
            raise ValueError("the file holds more than one project")
        created = await self.client.create_project(
            project=memory_pb2.Project(
                name=p.name,
                description=p.description,
                colour=p.colour,
                icon=p.icon,
                notes=p.notes,
                system_prompt=p.system_prompt,
            )
        )
        self.project_id = created.id
        self.count("project")

    async def session(self, s: memory_pb2.Session) -> None:
        created = await self.client.create_session(
            session=memory_pb2.Session(
                external_id=s.external_id,
                name=s.name,
                project_id=self._project(),
                metadata=s.metadata,
            )
        )
        self.sessions[s.id] = created.id
        self.count("session")

    async def flush_episodes(self) -> None:
        if not self.pending_episodes:
            return
        batch, self.pending_episodes = self.pending_episodes, []
        requests = [
            memory_pb2.ImportEpisodesRequest(
                episode=memory_pb2.CreateEpisodeRequest(
                    session_id=self._session(e.session_id),
                    user_message=e.user_message,
                    ai_response=e.ai_response,
                    metadata=e.metadata,
                    request_id=f"import-{e.id}",
                    occur_time=e.occur_time,
                )
            )
            for e in batch
        ]
        answer = await self.client.import_episodes(requests, timeout=None)
        if answer.errors:
            first = answer.errors[0]
            raise ValueError(
                f"{answer.failed} episodes were not imported; the first (exported id"
                f" {batch[first.index].id}): {first.message}"
            )
        for e, new_id in zip(batch, answer.episode_ids, strict=True):
            self.episodes[e.id] = new_id
        self.count("episode", len(batch))

    def _session(self, old: int) -> int:
        if not old:
            return 0
        try:
            return self.sessions[old]
        except KeyError:
            raise ValueError(f"session {old} is named before its session record") from None

    def _memory_values(self, m: memory_pb2.Memory, *, with_expiry: bool) -> memory_pb2.Memory:
        values = memory_pb2.Memory(
            kind=m.kind,
            title=m.title,
            content=m.content,
            tier=m.tier,
            project_id=self._project(),
            agent_id=m.agent_id,
            user_id=m.user_id,
            session_id=self._session(m.session_id),
            confidence=m.confidence,
            metadata=m.metadata,
        )
        # An expiry already past (an old version's) cannot be created again.
        if with_expiry and m.HasField("expire_time") and m.expire_time.ToSeconds() > time.time():
            values.expire_time.CopyFrom(m.expire_time)
        return values

    async def flush_memory(self) -> None:
        memory, revisions = self.pending_memory, self.pending_revisions
        if memory is None:
            return
        self.pending_memory, self.pending_revisions = None, []
        versions = [r.previous for r in revisions] + [memory]
        created = await self.client.create_memory(
            memory=self._memory_values(versions[0], with_expiry=True),
            request_id=f"import-memory-{memory.id}",
        )
        for revision, after in zip(revisions, versions[1:], strict=True):
            changed = memory_pb2.Memory()
            changed.CopyFrom(self._memory_values(after, with_expiry=True))
            changed.id = created.id
            await self.client.update_memory(
                memory=changed,
                update_mask=field_mask_pb2.FieldMask(paths=list(revision.changed_fields)),
                user_id=after.user_id,
                session_id=self._session(after.session_id),
            )
        self.count("memory")
        self.count("memory_revision", len(revisions))

    async def entity(self, e: graph_pb2.Entity) -> None:
        created = await self.client.upsert_entity(
            name=e.name,
            type=e.type,
            notes=e.notes,
            confidence=e.confidence,
            project_id=self._project(),
        )
        self.entities[e.id] = created.id
        self.count("entity")

    async def relationship(self, r: graph_pb2.Relationship) -> None:
        try:
            from_id, to_id = self.entities[r.from_id], self.entities[r.to_id]
        except KeyError:
            raise ValueError(f"relationship {r.id} names an entity not in the file") from None
        await self.client.upsert_relationship(
            from_id=from_id, to_id=to_id, label=r.label, notes=r.notes
        )
        self.count("relationship")

    async def summary(self, s: summary_pb2.Summary) -> None:
        session_id = self._session(s.session_id)
        await self.client.create_summary(
            summary=summary_pb2.Summary(
                session_id=session_id,
                project_id=0 if session_id else self._project(),
                content=s.content,
                first_episode_id=self.episodes.get(s.first_episode_id, 0),
                last_episode_id=self.episodes.get(s.last_episode_id, 0),
                episode_count=s.episode_count,
            )
        )
        self.count("summary")


async def import_project(client: NexusClient, lines: Iterable[str]) -> tuple[int, dict[str, int]]:
    """Import an export's lines; returns the new project's id and how many of
    each kind were created."""
    state = _Import(client)
    for record in read_records(lines):
        await state.add(record)
    await state.finish()
    return state._project(), state.counts
