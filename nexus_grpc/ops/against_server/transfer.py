"""``nexus-grpc export`` and ``nexus-grpc import``: move a project between servers.

Export writes ``ExportProject``'s records as JSON Lines, one ``ExportRecord``
a line (protobuf's JSON mapping with the proto's field names). Import reads
such a file into a server through the public API, as a client would, so it
runs under the importing key's tenant and rules:

- the project is created anew, with its retention (unless the import resumes
  into an existing one, below), and its sessions keep their ``external_id``;
  where the key's tenant already has a project of its name (a name is unique
  in a tenant), it takes the first free "name (2)", "name (3)", ... and says so;
- episodes go through ``ImportEpisodes`` with their ``occur_time`` and a
  ``request_id`` derived from the exported id (``import-<id>``), up to 10,000
  a call;
- each memory is created as the oldest version its history holds, with a
  ``request_id`` derived from the exported project and memory
  (``import-<source>-memory-<id>``), then each later version is applied with
  ``UpdateMemory`` and the fields that changed, so its history reads the same
  versions and changed fields;
- entities and relationships are upserted into the new project's graph, and
  summaries are created with their episode range mapped to the new ids.

Import is safe to run again. A session's ``external_id`` is unique in its
tenant, so a file whose first session is already on the server was imported
before (or exported from this server): the import then goes on into that
session's project (``--into`` names the project instead), and writes only
what the project does not hold yet. Whatever is already there, whether an
earlier run wrote it or not, is compared by value: sessions by
``external_id``; episodes by session, text, metadata and time; memories by
their values, a memory whose history an earlier run left half applied
resumed through its ``request_id``; entities by name and type;
relationships by their ends and label; summaries by session, text and
range. Re-running a finished import writes nothing and says so.

What the receiving server assigns is its own: ids, create/update times, the
time, request id and principal of each history entry, usage and mention
counters (a relationship or entity starts at one mention), and an entity's
``source`` (``MANUAL``: it was written through ``UpsertEntity``).

``nexus-grpc import --restore`` keeps those too. It streams the file to the
admin-only ``RestoreProject``, which writes it into a new project of the
key's tenant exactly as it was exported, ids apart: create/update and occur
times, each history entry's time, request id, principal and changed fields,
use and mention counters, last-used and last-seen times, entity sources and
summaries with their ranges. It needs an admin key when auth is on, and is
all or nothing: a bad record (named by its index, from 0) writes nothing,
and a server already holding one of the file's sessions (a restore keeps
every ``external_id``) refuses it with ALREADY_EXISTS. It does not resume: run it once,
into a server that does not hold the project. Embeddings are rebuilt by the
receiving server's index jobs; extraction is not run again (the graph comes
with the file).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import grpc
from google.protobuf import field_mask_pb2, json_format

from nexus_grpc.client import NexusClient, NexusClientError
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


def _key(*parts: Any) -> str:
    """A compact, order-sensitive digest of values, to compare records by."""
    return hashlib.sha256(
        json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def _struct(message: Any) -> Any:
    return json_format.MessageToDict(message)


#: Times that differ by less than this are one: a server stores them as float
#: seconds, so what it reads back may differ from what it was sent by a few
#: hundred nanoseconds.
SAME_TIME_NS = 1_000


def _episode_key(session_id: int, e: memory_pb2.Episode) -> str:
    """An episode's identity, but for its time (compared apart, within
    ``SAME_TIME_NS``)."""
    return _key(session_id, e.user_message, e.ai_response, _struct(e.metadata))


def _memory_key(m: memory_pb2.Memory) -> str:
    return _key(
        m.kind,
        m.title,
        m.content,
        m.tier,
        m.agent_id,
        m.user_id,
        m.session_id,
        round(m.confidence or 1.0, 9),
        _struct(m.metadata),
    )


def _summary_key(session_id: int, s: summary_pb2.Summary, first: int, last: int) -> str:
    return _key(session_id, s.content, first, last, s.episode_count)


@dataclass
class _Existing:
    """What the project being imported into already holds, by value, as the
    importing key reads it (its own ``ExportProject``)."""

    sessions: dict[str, int] = field(default_factory=dict)  # external_id: id
    # key: [(occur_time in ns, id)]
    episodes: defaultdict[str, list[tuple[int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    memories: Counter[str] = field(default_factory=Counter)
    entities: dict[tuple[str, str], int] = field(default_factory=dict)
    relationships: set[tuple[int, int, str, int]] = field(default_factory=set)
    summaries: Counter[str] = field(default_factory=Counter)

    @classmethod
    async def read(cls, client: NexusClient, project_id: int) -> _Existing:
        held = cls()
        async for record in client.export_project(project_id=project_id, timeout=None):
            kind = record.WhichOneof("record")
            if kind == "session":
                held.sessions[record.session.external_id] = record.session.id
            elif kind == "episode":
                e = record.episode
                held.episodes[_episode_key(e.session_id, e)].append(
                    (e.occur_time.ToNanoseconds(), e.id)
                )
            elif kind == "memory":
                held.memories[_memory_key(record.memory)] += 1
            elif kind == "entity":
                entity = record.entity
                held.entities[(entity.name.casefold(), entity.type)] = entity.id
            elif kind == "relationship":
                r = record.relationship
                held.relationships.add(_interval_key(r.from_id, r.to_id, r))
            elif kind == "summary":
                s = record.summary
                held.summaries[
                    _summary_key(s.session_id, s, s.first_episode_id, s.last_episode_id)
                ] += 1
        return held


@dataclass
class ImportResult:
    """Where an import went, and how many records of each kind it wrote
    (``created``) or found already there (``existing``)."""

    project_id: int
    resumed: bool
    created: dict[str, int]
    existing: dict[str, int]
    #: The new project's name where the file's was taken in the key's tenant
    #: (the file's name with the first free " (n)"); "" otherwise.
    renamed_to: str = ""


@dataclass
class _Import:
    client: NexusClient
    # An existing project to import into (``--into``); 0: decided by the file.
    into: int = 0
    # Called once the project is known: (its id, whether it already existed,
    # and the new project's name when the file's was taken, else "").
    on_project: Callable[[int, bool, str], None] | None = None
    project_id: int = 0
    renamed_to: str = ""
    # The project was there before this run: what it holds is compared first.
    resumed: bool = False
    # The file's project record, until its first session says whether an
    # earlier run created the project.
    pending_project: memory_pb2.Project | None = None
    # Names the exported project in the request ids derived from its records.
    source: str = ""
    held: _Existing = field(default_factory=_Existing)
    sessions: dict[int, int] = field(default_factory=dict)
    episodes: dict[int, int] = field(default_factory=dict)
    entities: dict[int, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    existing: dict[str, int] = field(default_factory=dict)
    pending_episodes: list[memory_pb2.Episode] = field(default_factory=list)
    pending_memory: memory_pb2.Memory | None = None
    pending_revisions: list[memory_pb2.MemoryRevision] = field(default_factory=list)
    # The file's memory formation, set on the new project once the import is done.
    formation_after: int | None = None

    def count(self, kind: str, n: int = 1) -> None:
        if n:
            self.counts[kind] = self.counts.get(kind, 0) + n

    def found(self, kind: str, n: int = 1) -> None:
        if n:
            self.existing[kind] = self.existing.get(kind, 0) + n

    async def add(self, record: memory_pb2.ExportRecord) -> None:
        kind = record.WhichOneof("record")
        if kind is None:
            raise ValueError("an empty ExportRecord")
        if kind == "project":
            await self.project(record.project)
            return
        if not self.source:
            raise ValueError("the file must begin with its project record")
        if not self.project_id:
            await self._settle(record.session if kind == "session" else None)
        if kind != "episode":
            await self.flush_episodes()
        if kind != "memory_revision":
            await self.flush_memory()
        if kind == "session":
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

    async def finish(self) -> None:
        if not self.source:
            raise ValueError("the file must begin with its project record")
        if not self.project_id:
            await self._settle(None)
        await self.flush_episodes()
        await self.flush_memory()
        # Unset (0) in the file is set back too: the project then reads unset,
        # as it was exported, and forms with the default.
        if self.formation_after is not None:
            await self.client.update_project(
                project=memory_pb2.Project(
                    id=self.project_id,
                    memory_formation=memory_pb2.MemoryFormation.ValueType(self.formation_after),
                ),
                update_mask=field_mask_pb2.FieldMask(paths=["memory_formation"]),
            )

    def _project(self) -> int:
        if not self.project_id:
            raise ValueError("the file must begin with its project record")
        return self.project_id

    async def project(self, p: memory_pb2.Project) -> None:
        if self.source:
            raise ValueError("the file holds more than one project")
        self.source = _key(p.id, p.create_time.ToNanoseconds())[:16]
        self.pending_project = p

    async def _settle(self, first_session: memory_pb2.Session | None) -> None:
        """Decide the project this import writes into: ``into``; else the
        project of the file's first session when the server already holds it
        (an earlier run, or the server exported from); else a new one."""
        p = self.pending_project
        assert p is not None
        target = self.into
        if not target and first_session is not None and first_session.external_id:
            try:
                held = await self.client.get_session(external_id=first_session.external_id)
            except NexusClientError as exc:
                if exc.code != grpc.StatusCode.NOT_FOUND:
                    raise
            else:
                if not held.project_id:
                    raise ValueError(
                        f"session {first_session.external_id} of this file is already on the"
                        " server, outside any project; nothing was imported"
                    )
                target = held.project_id
        if target:
            # NOT_FOUND for one the key may not see. An admin key sees every
            # tenant's, but an import writes only into the key's own tenant.
            existing = await self.client.get_project(id=target)
            mine = (await self.client.get_service_status()).tenant
            if existing.tenant and mine and existing.tenant != mine:
                raise ValueError(
                    f"project {target} belongs to tenant {existing.tenant!r}, not to this"
                    f" key's ({mine!r}); an import writes only into the key's own tenant, so"
                    " use a key of that tenant; nothing was imported"
                )
            self.project_id, self.resumed = target, True
            if existing.memory_formation == memory_pb2.MEMORY_FORMATION_OFF:
                # Off while an earlier run of this import wrote (or by choice):
                # the run that finishes sets the file's setting.
                self.formation_after = p.memory_formation
            self.held = await _Existing.read(self.client, target)
            self.found("project")
        else:
            # Created with formation off: the file brings the memories its
            # episodes formed, and forming them again from the imported
            # episodes would say them twice. The file's setting is set back
            # once everything is in (finish).
            values = _project_values(p)
            values.memory_formation = memory_pb2.MEMORY_FORMATION_OFF
            created = await _create_under_a_free_name(self.client, values)
            self.project_id = created.id
            if created.name != p.name:
                self.renamed_to = created.name
            self.formation_after = p.memory_formation
            self.count("project")
        if self.on_project is not None:
            self.on_project(self.project_id, self.resumed, self.renamed_to)

    async def session(self, s: memory_pb2.Session) -> None:
        if self.resumed and s.external_id in self.held.sessions:
            self.sessions[s.id] = self.held.sessions[s.external_id]
            self.found("session")
            return
        try:
            created = await self.client.create_session(
                session=memory_pb2.Session(
                    external_id=s.external_id,
                    name=s.name,
                    project_id=self._project(),
                    metadata=s.metadata,
                    user_id=s.user_id,
                    agent_id=s.agent_id,
                )
            )
        except NexusClientError as exc:
            if exc.code != grpc.StatusCode.ALREADY_EXISTS:
                raise
            raise ValueError(
                f"session {s.external_id} of this file is already on the server, in another"
                f" project than {self.project_id}: {exc.message}"
            ) from exc
        self.sessions[s.id] = created.id
        self.count("session")

    async def flush_episodes(self) -> None:
        if not self.pending_episodes:
            return
        batch, self.pending_episodes = self.pending_episodes, []
        new: list[memory_pb2.Episode] = []
        for e in batch:
            held = self.held.episodes.get(_episode_key(self._session(e.session_id), e), [])
            at = e.occur_time.ToNanoseconds()
            same = next((i for i, (t, _) in enumerate(held) if abs(t - at) < SAME_TIME_NS), None)
            if same is None:
                new.append(e)
            else:
                self.episodes[e.id] = held.pop(same)[1]
        self.found("episode", len(batch) - len(new))
        if not new:
            return
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
            for e in new
        ]
        answer = await self.client.import_episodes(requests, timeout=None)
        if answer.errors:
            first = answer.errors[0]
            raise ValueError(
                f"{answer.failed} episodes were not imported; the first (exported id"
                f" {new[first.index].id}): {first.message}"
            )
        for e, new_id in zip(new, answer.episode_ids, strict=True):
            self.episodes[e.id] = new_id
        # A replay: an earlier run wrote it, past what this run read as held.
        self.count("episode", answer.created)
        self.found("episode", answer.replayed)

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
        versions = [self._memory_values(r.previous, with_expiry=True) for r in revisions]
        versions.append(self._memory_values(memory, with_expiry=True))
        if self.resumed:
            key = _memory_key(versions[-1])
            if self.held.memories[key] > 0:
                self.held.memories[key] -= 1
                self.found("memory")
                self.found("memory_revision", len(revisions))
                return
        request_id = f"import-{self.source}-memory-{memory.id}"
        memory_id, applied = await self._create_memory(versions, request_id)
        if applied:  # an earlier run created it and applied some of its history
            self.found("memory")
            self.found("memory_revision", applied)
        else:
            self.count("memory")
        for revision, after in zip(revisions[applied:], versions[applied + 1 :], strict=True):
            changed = memory_pb2.Memory()
            changed.CopyFrom(after)
            changed.id = memory_id
            await self.client.update_memory(
                memory=changed,
                update_mask=field_mask_pb2.FieldMask(paths=list(revision.changed_fields)),
                user_id=after.user_id,
                session_id=after.session_id,
            )
        self.count("memory_revision", len(revisions) - applied)

    async def _create_memory(
        self, versions: list[memory_pb2.Memory], request_id: str
    ) -> tuple[int, int]:
        """Create the memory as its oldest version; in a resumed import, find
        the one an earlier run created instead. Returns its id and how many of
        its history's versions it already has.

        A ``request_id`` replays only the same values, so the version an
        earlier run left it at is the one whose replay is accepted; its
        history then says how many versions were applied.
        """
        first = versions[0]
        if not self.resumed:
            created = await self.client.create_memory(memory=first, request_id=request_id)
            return created.id, 0
        for values in [first, *reversed(versions[1:])]:
            try:
                got = await self.client.create_memory(memory=values, request_id=request_id)
            except NexusClientError as exc:
                if exc.code != grpc.StatusCode.ALREADY_EXISTS:
                    raise
                continue
            return got.id, await self._history_length(got.id, values)
        raise ValueError(
            f"request_id {request_id} was used on this server for a memory that no longer"
            " holds any version this file has of it; nothing more was imported"
        )

    async def _history_length(self, memory_id: int, owner: memory_pb2.Memory) -> int:
        count, token = 0, ""
        while True:
            page = await self.client.list_memory_history(
                memory_id=memory_id,
                user_id=owner.user_id,
                session_id=owner.session_id,
                page_token=token,
            )
            count += len(page.revisions)
            token = page.next_page_token
            if not token:
                return count

    async def entity(self, e: graph_pb2.Entity) -> None:
        held = self.held.entities.get((e.name.casefold(), e.type)) if self.resumed else None
        if held is not None:
            # Upserting it again would count one more mention.
            self.entities[e.id] = held
            self.found("entity")
            return
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
        if self.resumed and _interval_key(from_id, to_id, r) in self.held.relationships:
            self.found("relationship")
            return
        # Each interval as it held: from its valid_time, and until its
        # invalid_time when it ended.
        await self.client.upsert_relationship(
            from_id=from_id,
            to_id=to_id,
            label=r.label,
            notes=r.notes,
            valid_time=r.valid_time if r.HasField("valid_time") else None,
            invalid_time=r.invalid_time if r.HasField("invalid_time") else None,
        )
        self.count("relationship")

    async def summary(self, s: summary_pb2.Summary) -> None:
        session_id = self._session(s.session_id)
        first = self.episodes.get(s.first_episode_id, 0)
        last = self.episodes.get(s.last_episode_id, 0)
        if self.resumed:
            key = _summary_key(session_id, s, first, last)
            if self.held.summaries[key] > 0:
                self.held.summaries[key] -= 1
                self.found("summary")
                return
        await self.client.create_summary(
            summary=summary_pb2.Summary(
                session_id=session_id,
                project_id=0 if session_id else self._project(),
                content=s.content,
                first_episode_id=first,
                last_episode_id=last,
                episode_count=s.episode_count,
            )
        )
        self.count("summary")


def _interval_key(from_id: int, to_id: int, r: graph_pb2.Relationship) -> tuple[int, int, str, int]:
    """A relationship interval by its ends, label and start (to the second)."""
    return (from_id, to_id, r.label, r.valid_time.seconds)


#: How many names ``_create_under_a_free_name`` tries before it gives up.
FREE_NAME_TRIES = 100


async def _create_under_a_free_name(
    client: NexusClient, values: memory_pb2.Project
) -> memory_pb2.Project:
    """The file's project, created under its own name; where the key's tenant
    already has a project of that name (a project's name is unique in its
    tenant), under the first free "name (2)", "name (3)", ..., as an upgrade
    renames repeated names. That project is not this file's (an earlier run of
    the import would have been found by its first session): writing into it
    would mix two projects' records, and refusing would leave the file no way
    in but a rename by hand."""
    name, n = values.name, 1
    while True:
        try:
            return await client.create_project(project=values)
        except NexusClientError as exc:
            n += 1
            if exc.code != grpc.StatusCode.ALREADY_EXISTS or n > FREE_NAME_TRIES:
                raise
        values.name = f"{name} ({n})"


def _project_values(p: memory_pb2.Project) -> memory_pb2.Project:
    values = memory_pb2.Project(
        name=p.name,
        description=p.description,
        colour=p.colour,
        icon=p.icon,
        notes=p.notes,
        system_prompt=p.system_prompt,
        single_valued_labels=list(p.single_valued_labels),
        memory_formation=p.memory_formation,
    )
    if p.HasField("retention"):
        values.retention.CopyFrom(p.retention)
    return values


async def import_project(
    client: NexusClient,
    lines: Iterable[str],
    *,
    into: int = 0,
    on_project: Callable[[int, bool, str], None] | None = None,
) -> ImportResult:
    """Import an export's lines into a new project, or (``into``, or a file
    already imported before) into the project that holds it, writing only what
    it does not hold yet. ``on_project`` is told the project as soon as it is
    known (with its name when the file's was taken), so a caller can name it
    should the import fail."""
    state = _Import(client, into=into, on_project=on_project)
    for record in read_records(lines):
        await state.add(record)
    await state.finish()
    return ImportResult(
        state._project(), state.resumed, state.counts, state.existing, state.renamed_to
    )


@dataclass
class RestoreResult:
    project_id: int
    created: dict[str, int]


async def restore_project(client: NexusClient, lines: Iterable[str]) -> RestoreResult:
    """Restore an export's lines into a new project with ``RestoreProject``.

    The file is read whole first: the server writes nothing until the last
    record, so a line that does not parse must stop the restore before any
    of it is sent."""
    records = list(read_records(lines))
    answer = await client.restore_project(
        (memory_pb2.RestoreProjectRequest(record=r) for r in records), timeout=None
    )
    created = {
        "session": answer.sessions,
        "episode": answer.episodes,
        "memory": answer.memories,
        "memory_revision": answer.memory_revisions,
        "entity": answer.entities,
        "relationship": answer.relationships,
        "summary": answer.summaries,
    }
    return RestoreResult(answer.project_id, {k: n for k, n in created.items() if n})
