"""RestoreProject: an export written back as it was, into a new project.

``nexus-grpc import`` goes through the public API, so the receiving server
assigns its own times, counters and history authors. A restore (admin only)
keeps them: every record is written with the values it was exported with,
and only ids change, each mapped to the one this server assigns.

All or nothing: every record is checked (and every id it names resolved
within the stream) before anything is written, then the whole restore is
written in one transaction, so a bad record (or one that collides with what
the server holds, such as a session's external_id) leaves no trace.

Derived state is rebuilt, not copied. Embeddings are queued as durable index
jobs at bulk priority, behind live traffic, as ImportEpisodes queues them.
Extraction is not run again: a restored episode is written with its
extraction DONE, because the entities and relationships it gave rise to
arrive in the same stream with their mention counts, and extracting it again
would count each mention twice.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.graph import (
    ASSERT,
    END,
    MERGE_LLM,
    MERGE_MANUAL,
    METHODS,
    SOURCE_EXTRACTION,
    SOURCE_MANUAL,
    Entity,
    EntityAlias,
    EntityEpisode,
    EntityMerge,
    Evidence,
    Relationship,
)
from nexus_grpc.core.models import Episode, MemoryKind, NewEpisode, Project, Session
from nexus_grpc.core.names import name_key
from nexus_grpc.core.records import DELETE, EXPIRE, UPDATE, Memory, Revision, Summary
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import erasure as erasing
from nexus_grpc.domain import memory_upkeep, retention
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.conversations import _project_values
from nexus_grpc.domain.episode_followups import queue_followups, queue_summaries
from nexus_grpc.domain.export import ExportItem
from nexus_grpc.domain.graph import _entity_type, _label, _notes
from nexus_grpc.domain.memories import MAX_TITLE_CHARS, UPDATE_FIELDS, _check_tier
from nexus_grpc.errors import InvalidArgument, NexusError

#: The most records one RestoreProject call may stream, and their total
#: size: the whole restore is held, checked and written in one transaction.
MAX_RESTORE_RECORDS = 100_000
MAX_RESTORE_BYTES = 256 * 1024 * 1024

KINDS = (
    "session",
    "episode",
    "memory",
    "memory_revision",
    "entity",
    "relationship",
    "entity_alias",
    "entity_episode",
    "relationship_evidence",
    "entity_merge",
    "summary",
)


#: Each record's kind, by the type it is read into.
_KIND_OF_TYPE: dict[type, str] = {
    Project: "project",
    Session: "session",
    Episode: "episode",
    Memory: "memory",
    Revision: "memory_revision",
    Entity: "entity",
    Relationship: "relationship",
    EntityAlias: "entity_alias",
    EntityEpisode: "entity_episode",
    Evidence: "relationship_evidence",
    EntityMerge: "entity_merge",
    Summary: "summary",
}


def kind_of(item: ExportItem) -> str:
    return _KIND_OF_TYPE[type(item)]


def record_error(index: int, kind: str, exc: NexusError) -> NexusError:
    """``exc`` (same status) with the record it is about named first."""
    return exc.reworded(f"record {index} ({kind}): {exc.message}; nothing was restored")


class RestoreIntake:
    """RestoreProject's stream as it arrives: its limits, checked at once (a
    call past them ends there), and the first bad record, raised once the
    stream has ended (rpc/interception.drain says why). Nothing is written
    until every record has arrived and been checked."""

    def __init__(self) -> None:
        self._items: list[ExportItem] = []
        self._size = 0
        self._index = -1
        self._first_error: NexusError | None = None

    def next_record(self) -> None:
        """Another record has arrived."""
        self._index += 1
        if self._index >= MAX_RESTORE_RECORDS:
            raise InvalidArgument(
                f"at most {MAX_RESTORE_RECORDS} records per RestoreProject call; nothing"
                " was restored"
            )

    def undecodable(self, message: str) -> None:
        """The record could not be read off the wire."""
        self._first_error = self._first_error or InvalidArgument(
            f"record {self._index}: {message}; nothing was restored"
        )

    def weighs(self, size: int) -> bool:
        """The record is ``size`` bytes; whether it is still worth converting
        (after a bad record the rest is only read, for the limits and the
        client's sake)."""
        self._size += size
        if self._size > MAX_RESTORE_BYTES:
            raise InvalidArgument(
                f"the records reach {MAX_RESTORE_BYTES // (1024 * 1024)} MiB by record"
                f" {self._index}, the most one RestoreProject call takes; nothing was restored"
            )
        return self._first_error is None

    def add(self, item: ExportItem) -> None:
        self._items.append(item)

    def failed(self, kind: str, exc: NexusError) -> None:
        """The record (of ``kind``) is not one a restore takes."""
        self._first_error = self._first_error or record_error(self._index, kind, exc)

    def items(self) -> list[ExportItem]:
        """Every record, once the stream has ended; the first bad record's error."""
        if self._first_error is not None:
            raise self._first_error
        return self._items


@dataclass(frozen=True)
class Restored:
    project_id: int
    #: Records written, by kind (KINDS).
    counts: dict[str, int]
    #: Records of users forgotten since the export, left out (domain/erasure.py).
    erased: int = 0


@dataclass
class _Plan:
    """The checked records, in stream order, with the stream's ids that
    each refers to (resolved to new ids as the rows are written)."""

    project: Project
    project_values: dict
    old_project: int
    items: list[tuple[int, ExportItem]] = field(default_factory=list)
    sessions: set[int] = field(default_factory=set)
    episodes: set[int] = field(default_factory=set)
    memories: set[int] = field(default_factory=set)
    entities: set[int] = field(default_factory=set)
    evidence: set[int] = field(default_factory=set)
    # What the schema keeps unique, so that a duplicate is this record's
    # INVALID_ARGUMENT rather than a constraint failing mid-write.
    external_ids: set[str] = field(default_factory=set)
    entity_keys: set[tuple[str, str]] = field(default_factory=set)
    edges: set[tuple[int, int, str, float | None]] = field(default_factory=set)
    links: set[tuple[int, int]] = field(default_factory=set)


def _time(value: float, fallback: float) -> float:
    """An exported time; an unset one (0) is the restore's."""
    return value if value else fallback


def _new(ids: set[int], field_name: str, value: int, kind: str) -> None:
    v.positive_id(field_name, value)
    if value in ids:
        raise InvalidArgument(
            f"{field_name} {value} is a second {kind} record with that id", field=field_name
        )
    ids.add(value)


def _in_project(plan: _Plan, field_name: str, value: int) -> None:
    if value != plan.old_project:
        raise InvalidArgument(
            f"{field_name} {value} is not the project of this stream ({plan.old_project})",
            field=field_name,
        )


def _named(ids: set[int], field_name: str, value: int, kind: str) -> None:
    if value not in ids:
        raise InvalidArgument(
            f"{field_name} {value} names no {kind} record earlier in the stream",
            field=field_name,
        )


def _confidence(field_name: str, value: float) -> None:
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise InvalidArgument(
            f"{field_name} must be between 0 and 1, got {value}", field=field_name
        )


def _check_memory(plan: _Plan, m: Memory, prefix: str, at: float) -> Memory:
    if m.kind not in (int(MemoryKind.PROJECT), int(MemoryKind.USER)):
        raise InvalidArgument(
            f"{prefix}kind must be PROJECT or USER, got {m.kind}", field=f"{prefix}kind"
        )
    v.name(f"{prefix}title", m.title, limit=MAX_TITLE_CHARS, required=True)
    v.text(f"{prefix}content", m.content, limit=v.MAX_MESSAGE_CHARS, required=True)
    _check_tier(f"{prefix}tier", m.tier, default=False)
    _in_project(plan, f"{prefix}project_id", m.project_id)
    v.identifier(f"{prefix}user_id", m.user_id)
    v.identifier(f"{prefix}agent_id", m.agent_id)
    if m.kind == MemoryKind.USER and not m.user_id:
        raise InvalidArgument(
            f"{prefix}user_id is required for a USER memory", field=f"{prefix}user_id"
        )
    if m.kind == MemoryKind.PROJECT and m.user_id:
        raise InvalidArgument(
            f"{prefix}user_id must be empty for a PROJECT memory", field=f"{prefix}user_id"
        )
    if m.session_id:
        _named(plan.sessions, f"{prefix}session_id", m.session_id, "session")
    _confidence(f"{prefix}confidence", m.confidence)
    v.count(f"{prefix}use_count", m.use_count)
    return replace(
        m,
        metadata=v.metadata(f"{prefix}metadata", m.metadata),
        created_at=_time(m.created_at, at),
        updated_at=_time(m.updated_at, _time(m.created_at, at)),
    )


def _plan(items: Sequence[ExportItem], at: float) -> _Plan:
    """Every record checked, in order; INVALID_ARGUMENT naming the first bad
    one's index and field."""
    if not items:
        raise InvalidArgument(
            "the stream holds no records; the first must be the project; nothing was restored"
        )
    first = items[0]
    if not isinstance(first, Project):
        raise InvalidArgument(
            f"record 0 is a {kind_of(first)}; the first record must be the project;"
            " nothing was restored"
        )
    try:
        values = _project_values(
            {
                "name": first.name,
                "description": first.description,
                "colour": first.colour,
                "icon": first.icon,
                "notes": first.notes,
                "system_prompt": first.system_prompt,
                "retention": first.retention,
                "single_valued_labels": list(first.single_valued_labels or ()),
                "memory_formation": first.memory_formation,
            }
        )
        v.positive_id("project.id", first.id)
    except NexusError as exc:
        raise record_error(0, "project", exc) from None
    plan = _Plan(first, values, first.id)
    last_memory: int | None = None
    for index, item in enumerate(items[1:], 1):
        kind = kind_of(item)
        try:
            checked = _check(plan, item, last_memory, at)
        except NexusError as exc:
            raise record_error(index, kind, exc) from None
        if isinstance(checked, Memory):
            last_memory = checked.id
        elif kind != "memory_revision":
            last_memory = None
        plan.items.append((index, checked))
    return plan


def _check(plan: _Plan, item: ExportItem, last_memory: int | None, at: float) -> ExportItem:
    """One record checked against the plan so far, its times filled in;
    INVALID_ARGUMENT naming its field."""
    if isinstance(item, Project):
        raise InvalidArgument("a second project record; a stream holds one project")
    if isinstance(item, Session):
        return _check_session(plan, item, at)
    if isinstance(item, Episode):
        return _check_episode(plan, item, at)
    if isinstance(item, Memory):
        _new(plan.memories, "memory.id", item.id, "memory")
        return _check_memory(plan, item, "memory.", at)
    if isinstance(item, Revision):
        return _check_revision(plan, item, last_memory, at)
    if isinstance(item, Entity):
        return _check_entity(plan, item, at)
    if isinstance(item, Relationship):
        return _check_relationship(plan, item, at)
    if isinstance(item, EntityAlias):
        return _check_entity_alias(plan, item, at)
    if isinstance(item, EntityEpisode):
        return _check_entity_episode(plan, item)
    if isinstance(item, Evidence):
        return _check_evidence(plan, item, at)
    if isinstance(item, EntityMerge):
        return _check_entity_merge(plan, item, at)
    assert isinstance(item, Summary)
    return _check_summary(plan, item, at)


def _check_session(plan: _Plan, item: Session, at: float) -> Session:
    _new(plan.sessions, "session.id", item.id, "session")
    _in_project(plan, "session.project_id", item.project_id)
    v.name("session.name", item.name)
    external_id = v.external_id(item.external_id)
    if external_id in plan.external_ids:
        raise InvalidArgument(
            f"session.external_id {external_id} is a second session record with it",
            field="session.external_id",
        )
    plan.external_ids.add(external_id)
    v.identifier("session.user_id", item.user_id)
    v.identifier("session.agent_id", item.agent_id)
    return replace(
        item,
        external_id=external_id,
        metadata=v.metadata("session.metadata", item.metadata),
        created_at=_time(item.created_at, at),
    )


def _check_episode(plan: _Plan, item: Episode, at: float) -> Episode:
    _named(plan.sessions, "episode.session_id", item.session_id, "session")
    _new(plan.episodes, "episode.id", item.id, "episode")
    v.text("episode.user_message", item.user_message, limit=v.MAX_MESSAGE_CHARS, required=True)
    v.text("episode.ai_response", item.ai_response, limit=v.MAX_MESSAGE_CHARS)
    created = _time(item.created_at, at)
    v.occur_time("episode.occur_time", item.occur_at or None)
    return replace(
        item,
        metadata=v.metadata("episode.metadata", item.metadata),
        created_at=created,
        occur_at=item.occur_at or created,
    )


def _check_revision(plan: _Plan, item: Revision, last_memory: int | None, at: float) -> Revision:
    if last_memory is None or item.memory_id != last_memory:
        raise InvalidArgument(
            f"memory_revision.memory_id {item.memory_id} is not the memory record just"
            " before it (a memory's revisions follow it)",
            field="memory_revision.memory_id",
        )
    if item.action not in (UPDATE, DELETE, EXPIRE):
        raise InvalidArgument(
            f"memory_revision.change must be UPDATE, DELETE or EXPIRE, got {item.action}",
            field="memory_revision.change",
        )
    unknown = [f for f in item.changed if f not in UPDATE_FIELDS]
    if unknown:
        raise InvalidArgument(
            f"memory_revision.changed_fields names {unknown[0]!r}, not a memory field"
            f" an update changes ({', '.join(UPDATE_FIELDS)})",
            field="memory_revision.changed_fields",
        )
    v.identifier("memory_revision.request_id", item.request_id)
    v.name("memory_revision.principal", item.principal)
    previous = _check_memory(plan, item.previous, "memory_revision.previous.", at)
    return replace(item, previous=previous, changed_at=_time(item.changed_at, at))


def _check_entity(plan: _Plan, item: Entity, at: float) -> Entity:
    _new(plan.entities, "entity.id", item.id, "entity")
    _in_project(plan, "entity.project_id", item.project_id)
    if item.session_id:
        raise InvalidArgument(
            "entity.session_id must be 0: a project's graph is the project's, not a session's",
            field="entity.session_id",
        )
    v.name("entity.name", item.name, required=True)
    etype = _entity_type("entity.type", item.type, required=True)
    # A graph holds one entity of a name's key and type.
    key = (name_key(item.name, etype), etype)
    if key in plan.entity_keys:
        raise InvalidArgument(
            f"entity {item.name[:40]!r} ({etype}) is a second entity record of that name"
            " and type (names compare as their keys: case, spacing, punctuation aside)",
            fields=("entity.name", "entity.type"),
        )
    plan.entity_keys.add(key)
    _notes(item.notes or "")
    _confidence("entity.confidence", item.confidence)
    v.count("entity.mention_count", item.mention_count)
    if item.source not in (SOURCE_EXTRACTION, SOURCE_MANUAL):
        raise InvalidArgument(
            f"entity.source must be EXTRACTION or MANUAL, got {item.source}",
            field="entity.source",
        )
    return replace(item, type=etype, created_at=_time(item.created_at, at))


def _check_relationship(plan: _Plan, item: Relationship, at: float) -> Relationship:
    _named(plan.entities, "relationship.from_id", item.from_id, "entity")
    _named(plan.entities, "relationship.to_id", item.to_id, "entity")
    label = _label(item.label)
    created = _time(item.created_at, at)
    valid = item.valid_at or created
    if item.invalid_at is not None and item.invalid_at <= valid:
        raise InvalidArgument(
            "relationship.invalid_time must be after its valid_time",
            field="relationship.invalid_time",
        )
    edge = (item.from_id, item.to_id, label, valid)
    if edge in plan.edges:
        raise InvalidArgument(
            f"relationship {label!r} from {item.from_id} to {item.to_id} is a second"
            " relationship record with those ends, label and valid_time"
        )
    plan.edges.add(edge)
    for name, episode in (("asserted", item.asserted_by), ("ended", item.ended_by)):
        if episode:
            _named(plan.episodes, f"relationship.{name}_episode_id", episode, "episode")
    _notes(item.notes or "")
    v.count("relationship.mention_count", item.mention_count)
    return replace(item, label=label, created_at=created, valid_at=valid)


def _check_entity_alias(plan: _Plan, item: EntityAlias, at: float) -> EntityAlias:
    _named(plan.entities, "entity_alias.entity_id", item.entity_id, "entity")
    v.name("entity_alias.name", item.name, required=True)
    if item.method not in METHODS:
        raise InvalidArgument(
            f"entity_alias.method is not a resolution method: {item.method}",
            field="entity_alias.method",
        )
    if item.episode_id:
        _named(plan.episodes, "entity_alias.episode_id", item.episode_id, "episode")
    return replace(item, created_at=_time(item.created_at, at))


def _check_entity_episode(plan: _Plan, item: EntityEpisode) -> EntityEpisode:
    _named(plan.entities, "entity_episode.entity_id", item.entity_id, "entity")
    _named(plan.episodes, "entity_episode.episode_id", item.episode_id, "episode")
    link = (item.entity_id, item.episode_id)
    if link in plan.links:
        raise InvalidArgument("entity_episode names a link an earlier record named")
    plan.links.add(link)
    return item


def _check_evidence(plan: _Plan, item: Evidence, at: float) -> Evidence:
    _new(plan.evidence, "relationship_evidence.id", item.id, "relationship_evidence")
    _named(plan.entities, "relationship_evidence.from_id", item.from_id, "entity")
    _named(plan.entities, "relationship_evidence.to_id", item.to_id, "entity")
    if item.kind not in (ASSERT, END):
        raise InvalidArgument(
            f"relationship_evidence kind {item.kind!r}", field="relationship_evidence.kind"
        )
    if not item.at:
        raise InvalidArgument(
            "relationship_evidence.time is required", field="relationship_evidence.time"
        )
    if item.episode_id:
        _named(plan.episodes, "relationship_evidence.episode_id", item.episode_id, "episode")
    v.count("relationship_evidence.mentions", item.mentions)
    _notes(item.notes or "")
    return replace(item, label=_label(item.label), created_at=_time(item.created_at, at))


def _check_entity_merge(plan: _Plan, item: EntityMerge, at: float) -> EntityMerge:
    _named(plan.entities, "entity_merge.target_id", item.target_id, "entity")
    if item.method not in (MERGE_MANUAL, MERGE_LLM):
        raise InvalidArgument(
            f"entity_merge.method is not a merge method: {item.method}",
            field="entity_merge.method",
        )
    for source in item.sources:
        for ev in (*source.evidence_from, *source.evidence_to):
            _named(plan.evidence, "entity_merge.sources.evidence ids", ev, "evidence")
        for ep in (*source.episode_ids, *source.shared_episode_ids):
            _named(plan.episodes, "entity_merge.sources.episode_ids", ep, "episode")
        _entity_type("entity_merge.sources.entity.type", source.entity.type, required=True)
    v.text("entity_merge.reason", item.reason, limit=1000)
    return replace(item, created_at=_time(item.created_at, at))


def _check_summary(plan: _Plan, item: Summary, at: float) -> Summary:
    if item.session_id:
        _named(plan.sessions, "summary.session_id", item.session_id, "session")
    else:
        _in_project(plan, "summary.project_id", item.project_id)
    v.text("summary.content", item.content, limit=v.MAX_MESSAGE_CHARS, required=True)
    v.count("summary.episode_count", item.episode_count)
    created = _time(item.created_at, at)
    return replace(item, created_at=created, updated_at=_time(item.updated_at, created))


def _write_without_forgotten(uow: UnitOfWork, plan: _Plan, tenant: str, at: float) -> Restored:
    """The restore, less what it held of users forgotten since the export."""
    restored = _write(uow, plan, tenant, at)
    erased = erasing.forget_restored(uow, tenant, restored.project_id)
    return replace(restored, erased=erased)


def _write(uow: UnitOfWork, plan: _Plan, tenant: str, at: float) -> Restored:
    p = plan.project
    project_id = uow.restore.insert_project(
        plan.project_values, _time(p.created_at, at), _time(p.updated_at, at), tenant
    )
    if plan.project_values["retention"] is not None:
        retention.start(uow, project_id, at)
    rows = _Rows(uow, tenant, project_id)
    counts = dict.fromkeys(KINDS, 0)
    for index, item in plan.items:
        kind = kind_of(item)
        counts[kind] += 1
        if rows.pending and not isinstance(item, Episode):
            rows.flush_episodes()
        try:
            if isinstance(item, Episode):
                # Episodes are written together, as ImportEpisodes writes a batch.
                rows.pending.append((index, item))
            elif not rows.insert_conversation(item):
                rows.insert_graph(item)
        except NexusError as exc:
            raise record_error(index, kind, exc) from None
    if rows.pending:
        rows.flush_episodes()
    # An export from before aliases existed: each entity is known by its name.
    uow.restore.ensure_own_alias(list(rows.entities.values()))
    # Summaries are rebuilt as a live session's are: a session with enough
    # episodes since its last restored summary queues its next one.
    # The summary a live session would have queued by now: one with enough
    # new episodes since its last restored summary.
    queue_summaries(uow, list(rows.sessions.values()), jobs.BULK)
    return Restored(project_id, counts)


class _Rows:
    """The restore's rows as they are written, in the stream's order: each id
    the stream names mapped to the one this server gave its row."""

    def __init__(self, uow: UnitOfWork, tenant: str, project_id: int) -> None:
        self.uow = uow
        self.tenant = tenant
        self.project_id = project_id
        self.sessions: dict[int, int] = {}
        self.episodes: dict[int, int] = {}
        self.memories: dict[int, int] = {}
        self.entities: dict[int, int] = {}
        self.evidence: dict[int, int] = {}
        self.pending: list[tuple[int, Episode]] = []
        # Each restored session's user: a restore is an admin's, who may act for
        # every user, so its episodes act for their session's user.
        self.users: dict[int, str] = {}

    def flush_episodes(self) -> None:
        sessions, users, uow = self.sessions, self.users, self.uow
        ids = uow.episodes.insert_many(
            [
                NewEpisode(
                    sessions[e.session_id],
                    e.user_message,
                    e.ai_response,
                    e.metadata,
                    None,
                    e.occur_at,
                    e.created_at,
                    acts_for=users.get(e.session_id, ""),
                )
                for _, e in self.pending
            ],
            extracted=True,
        )
        stored = uow.episodes.get_many(ids)
        queue_followups(uow, [stored[i] for i in ids], jobs.BULK, extracted=True)
        self.episodes.update((e.id, new) for (_, e), new in zip(self.pending, ids, strict=True))
        self.pending.clear()

    def memory_ids(self, m: Memory, new_id: int) -> Memory:
        return replace(
            m,
            id=new_id,
            project_id=self.project_id,
            session_id=self.sessions[m.session_id] if m.session_id else 0,
            tenant=self.tenant,
            request_id=None,
            source_episode_id=self.episodes.get(m.source_episode_id or 0),
        )

    def insert_conversation(self, item: ExportItem) -> bool:
        """Sessions, memories and their revisions, summaries; False for another kind."""
        uow, episodes, sessions = self.uow, self.episodes, self.sessions
        if isinstance(item, Session):
            sessions[item.id] = uow.restore.insert_session(
                item.external_id,
                item.name,
                self.project_id,
                item.metadata,
                item.created_at,
                self.tenant,
                user_id=item.user_id,
                agent_id=item.agent_id,
            )
            self.users[item.id] = item.user_id
        elif isinstance(item, Memory):
            memory_id = uow.restore.insert_memory(self.memory_ids(item, 0), self.tenant)
            self.memories[item.id] = memory_id
            uow.jobs.enqueue(jobs.INDEX_MEMORY, [memory_id], priority=jobs.BULK)
            memory_upkeep.schedule_expiry(uow, memory_id, item.expire_at)
        elif isinstance(item, Revision):
            new_id = self.memories[item.memory_id]
            uow.restore.insert_revision(
                replace(
                    item,
                    memory_id=new_id,
                    previous=self.memory_ids(item.previous, new_id),
                    episode_id=episodes.get(item.episode_id or 0),
                ),
            )
        elif isinstance(item, Summary):
            # A range may name an episode the export no longer held (deleted
            # since, or past retention): as `nexus-grpc import` does, it
            # is then 0, unknown.
            summary_id = uow.restore.insert_summary(
                replace(
                    item,
                    session_id=sessions[item.session_id] if item.session_id else 0,
                    project_id=self.project_id,
                    first_episode_id=episodes.get(item.first_episode_id, 0),
                    last_episode_id=episodes.get(item.last_episode_id, 0),
                ),
            )
            uow.jobs.enqueue(jobs.INDEX_SUMMARY, [summary_id], priority=jobs.BULK)
        else:
            return False
        return True

    def insert_graph(self, item: ExportItem) -> None:
        """Entities, their aliases, links and merges, relationships and their evidence."""
        uow, entities, episodes = self.uow, self.entities, self.episodes
        if isinstance(item, Entity):
            entity_id = uow.restore.insert_entity(
                replace(item, project_id=self.project_id), self.tenant
            )
            entities[item.id] = entity_id
            uow.jobs.enqueue(jobs.INDEX_ENTITY, [entity_id], priority=jobs.BULK)
        elif isinstance(item, Relationship):
            uow.restore.insert_relationship(
                replace(
                    item,
                    from_id=entities[item.from_id],
                    to_id=entities[item.to_id],
                    asserted_by=episodes.get(item.asserted_by or 0),
                    ended_by=episodes.get(item.ended_by or 0),
                ),
            )
        elif isinstance(item, EntityAlias):
            uow.restore.insert_alias(
                replace(
                    item,
                    entity_id=entities[item.entity_id],
                    episode_id=episodes.get(item.episode_id or 0),
                ),
            )
        elif isinstance(item, EntityEpisode):
            uow.restore.insert_episode_link(entities[item.entity_id], episodes[item.episode_id])
        elif isinstance(item, Evidence):
            self.evidence[item.id] = uow.restore.insert_evidence(
                replace(
                    item,
                    from_id=entities[item.from_id],
                    to_id=entities[item.to_id],
                    episode_id=episodes.get(item.episode_id or 0),
                ),
            )
        elif isinstance(item, EntityMerge):
            uow.restore.insert_merge(
                _merge_ids(item, entities, episodes, self.evidence, self.project_id, self.tenant)
            )


def _merge_ids(
    m: EntityMerge,
    entities: dict[int, int],
    episodes: dict[int, int],
    evidence: dict[int, int],
    project_id: int,
    tenant: str,
) -> EntityMerge:
    """A merge in this server's ids. Its sources were never rows here, so
    they have none: undoing it gives them new ones."""
    return replace(
        m,
        project_id=project_id,
        session_id=0,
        tenant=tenant,
        target_id=entities[m.target_id],
        source_ids=(),
        request_id=None,
        sources=tuple(
            replace(
                s,
                entity=replace(s.entity, id=0, project_id=project_id, session_id=0, tenant=tenant),
                episode_ids=tuple(episodes[e] for e in s.episode_ids),
                shared_episode_ids=tuple(episodes[e] for e in s.shared_episode_ids),
                evidence_from=tuple(evidence[e] for e in s.evidence_from),
                evidence_to=tuple(evidence[e] for e in s.evidence_to),
            )
            for s in m.sources
        ),
    )


class ProjectRestore:
    def __init__(
        self, db: Database, signals: JobSignals, default_tenant: str = tenancy.DEFAULT_TENANT
    ) -> None:
        self.db = db
        self.signals = signals
        self.default_tenant = default_tenant

    async def restore(self, items: Sequence[ExportItem]) -> Restored:
        """Write ``items`` (an export, the project first) into a new project
        of the caller's tenant, in one transaction."""
        at = time.time()
        # Up to MAX_RESTORE_RECORDS records are checked: off the event loop,
        # which every other call shares.
        plan = await asyncio.to_thread(_plan, items, at)
        # An admin key sees every tenant but creates in its own, as
        # CreateProject does.
        tenant = tenancy.creator(self.default_tenant)
        restored = await self.db.write(lambda c: _write_without_forgotten(c, plan, tenant, at))
        self.signals.wake(
            jobs.INDEX_EPISODE,
            jobs.INDEX_MEMORY,
            jobs.INDEX_ENTITY,
            jobs.INDEX_SUMMARY,
            jobs.SUMMARIZE_SESSION,
            jobs.EXPIRE_MEMORY,
            jobs.RETAIN_PROJECT,
        )
        return restored
