"""GraphService use cases: entities, relationships, traversal, entity search,
and the extraction-event watch."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, replace

from nexus_grpc.core import documents, jobs, tenancy
from nexus_grpc.core.events import EventBroadcaster
from nexus_grpc.core.graph import (
    ASSERT,
    CURRENT,
    END,
    METHOD_MANUAL,
    SOURCE_MANUAL,
    Entity,
    EntityAlias,
    Relationship,
    When,
)
from nexus_grpc.core.models import Page
from nexus_grpc.core.names import compatible_types, name_key
from nexus_grpc.core.records import EventFilter, ExtractionEvent
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import entity_writes, event_retention, facts, inline_vectors, paging
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.inline_vectors import InlineVectors
from nexus_grpc.domain.retrieval.episode_scope import check_session_graph as _check_session_graph
from nexus_grpc.embedding import Embedder
from nexus_grpc.errors import FailedPrecondition, InvalidArgument, NotFound, ResourceInfo
from nexus_grpc.llm.extraction_prompts import ENTITY_TYPES
from nexus_grpc.llm.text import to_snake_case
from nexus_grpc.vectors import VectorIndex

ENTITIES = "entities"
MAX_DEPTH = 3
MAX_NEIGHBOR_SEEDS = 1000
# How many events a watch reads per query; bounds what one stream holds. A
# slow reader keeps its page decoded: at 100 events that was ~0.6 MiB each,
# up to the --max-watch-streams cap of them. 20 still replays thousands a second.
WATCH_PAGE = 20
# Safety net: a watcher re-reads at least this often even without a wake-up.
WATCH_POLL_SECONDS = 5.0


@dataclass(frozen=True)
class Subgraph:
    nodes: list[Entity]
    edges: list[Relationship]


def _entity_type(field: str, value: str, *, required: bool) -> str:
    etype = value.strip().lower()
    if not etype:
        if required:
            raise InvalidArgument(
                f"{field} is required: one of {', '.join(sorted(ENTITY_TYPES))}", field=field
            )
        return ""
    if etype not in ENTITY_TYPES:
        raise InvalidArgument(
            f"{field} {value[:40]!r} is not an entity type; use one of"
            f" {', '.join(sorted(ENTITY_TYPES))}",
            field=field,
        )
    return etype


def _label(value: str) -> str:
    v.name("label", value, required=True)
    label = to_snake_case(value)
    if not label:
        raise InvalidArgument(f"label {value[:40]!r} has no letters or digits", field="label")
    return label


def _notes(value: str) -> str | None:
    v.text("notes", value, limit=v.MAX_SHORT_TEXT_CHARS)
    return value.strip() or None


# Times before 1970 or past 9999 are a client's mistake, not a fact's start.
MAX_TIME = 253_402_300_799.0


def _valid_time(field: str, value: float) -> float:
    if not 0 < value <= MAX_TIME:
        raise InvalidArgument(
            f"{field} must be a time after 1970, got {value:.0f} seconds", field=field
        )
    return value


def _when(as_of: float | None, include_history: bool) -> When:
    """Which intervals a read shows; both at once is a contradiction."""
    if as_of is not None and include_history:
        raise InvalidArgument(
            "give as_of (the graph as it held then) or include_history (every interval), not both",
            fields=("as_of", "include_history"),
        )
    if as_of is not None:
        if not 0 < as_of <= MAX_TIME:
            raise InvalidArgument(
                f"as_of must be a time after 1970, got {as_of:.0f} seconds", field="as_of"
            )
        return When(as_of=as_of)
    return When(history=True) if include_history else CURRENT


def _entity_graph_tenant(project_id: int, session_id: int, default_tenant: str) -> str | None:
    """The caller's tenant (``tenancy.visible()``), once the graph a new
    entity names (a project's, a session's or neither) is one it may name."""
    v.positive_id("project_id", project_id, required=False)
    v.positive_id("session_id", session_id, required=False)
    if project_id and session_id:
        raise InvalidArgument(
            "set project_id or session_id, not both: an entity lives in one graph",
            fields=("project_id", "session_id"),
        )
    tenant = tenancy.visible()
    if not project_id and not session_id and tenant not in (None, default_tenant):
        # The graph of no project and no session predates tenants and
        # belongs to the default tenant; one name in it is one entity.
        raise InvalidArgument(
            "set project_id or session_id: the graph outside any project or session"
            " belongs to the default tenant",
            fields=("project_id", "session_id"),
        )
    return tenant


def _entity_by_key(uow: UnitOfWork, graph: tuple[int, int], name: str, etype: str) -> int | None:
    """The entity a name names exactly, under any spelling it is known by:
    its own key first, else the one entity with that key as an alias."""
    key = name_key(name, etype)
    own = uow.graph.entity_id_of(key, etype, *graph)
    if own is not None:
        return own
    found = uow.graph.entities_with_key(graph, key, [etype])
    if len(found) == 1:
        return found[0]
    others = uow.graph.entities_with_key(graph, key, compatible_types(etype))
    return others[0] if len(others) == 1 and not found else None


def _graph_name(graph: tuple[int, int]) -> str:
    project_id, session_id = graph
    if project_id:
        return f"project {project_id}"
    if session_id:
        return f"the graph of session {session_id} (outside any project)"
    return "project 0 (no project)"


class Graph:
    def __init__(
        self,
        db: Database,
        signals: JobSignals,
        embedder: Embedder,
        index: VectorIndex,
        events: EventBroadcaster,
        default_tenant: str = tenancy.DEFAULT_TENANT,
        inline: InlineVectors | None = None,
        event_retention: float | None = None,
    ) -> None:
        self.default_tenant = default_tenant
        # How long a watcher may replay an event (None: for ever); the storage
        # upkeep deletes older ones (domain/event_retention.py).
        self.event_retention = event_retention
        # Set where vectors live in the database's own tables (pgvector): a new
        # entity's vector is then written in its row's transaction.
        self.inline = inline
        self.db = db
        self.signals = signals
        self.embedder = embedder
        self.index = index
        self.events = events

    # Entities ---------------------------------------------------------------

    async def upsert_entity(
        self,
        name: str,
        etype: str,
        notes: str,
        confidence: float,
        project_id: int,
        *,
        session_id: int = 0,
    ) -> Entity:
        v.name("name", name, required=True)
        clean_name = " ".join(name.split())
        clean_type = _entity_type("type", etype, required=True)
        clean_notes = _notes(notes)
        if not 0.0 <= confidence <= 1.0:
            raise InvalidArgument(
                f"confidence must be between 0 and 1, got {confidence}", field="confidence"
            )
        tenant = _entity_graph_tenant(project_id, session_id, self.default_tenant)

        vector = None
        if self.inline is not None:
            vector = await self.inline.embed(
                documents.entity_text(clean_name, clean_type, clean_notes)
            )

        def write(uow: UnitOfWork, vector: list[float] | None) -> Entity:
            if project_id and not uow.projects.exists(project_id, tenant):
                raise FailedPrecondition(f"project_id {project_id} does not exist")
            if session_id:
                try:
                    _check_session_graph(uow, session_id)
                except NotFound:
                    # A reference in a write, like project_id above: a precondition.
                    raise FailedPrecondition(f"session_id {session_id} does not exist") from None
            graph = (project_id, session_id)
            existing = _entity_by_key(uow, graph, clean_name, clean_type)
            if existing is not None:
                # A name the graph knows, under any spelling: one more mention (a
                # new vector waits for the index job; a running one's re-embedding wins).
                entity_writes.mention(uow, existing, clean_notes, confidence=confidence or None)
                entity_writes.add_alias(uow, existing, clean_name, method=METHOD_MANUAL)
                return uow.graph.get_entity(existing)
            entity_id = entity_writes.insert(
                uow,
                graph,
                clean_name,
                clean_type,
                clean_notes,
                source=SOURCE_MANUAL,
                method=METHOD_MANUAL,
                confidence=confidence or None,
                fallback_tenant=self.default_tenant,
                embedded=vector is not None,
            )
            if vector is not None:
                InlineVectors.put(
                    uow,
                    inline_vectors.ENTITIES,
                    entity_id,
                    vector,
                    documents.entity_payload(project_id, session_id),
                )
            return uow.graph.get_entity(entity_id)

        entity = await inline_vectors.write_with(self.db, vector, write)
        self.signals.wake(jobs.INDEX_ENTITY)
        return entity

    async def get_entity(self, entity_id: int) -> Entity:
        v.positive_id("id", entity_id)
        tenant = tenancy.visible()
        return await self.db.read(lambda c: c.graph.get_entity(entity_id, tenant))

    async def delete_entity(self, entity_id: int) -> int:
        v.positive_id("id", entity_id)
        tenant = tenancy.visible()

        def write(uow: UnitOfWork) -> int:
            entity = uow.graph.get_entity(entity_id, tenant)  # NOT_FOUND across tenants
            # Facts of others this entity ended or was the value of hold
            # differently without it: derive them again.
            groups = {(f, label) for f, label in uow.graph.groups_of([entity_id]) if f != entity_id}
            deleted = entity_writes.delete(uow, entity_id)
            graph = (entity.project_id, entity.session_id)
            facts.rederive(uow, groups, facts.single_valued(uow, graph))
            return deleted

        deleted = await self.db.write(write)
        self.signals.wake(jobs.INDEX_ENTITY)
        return deleted

    async def list_entities(
        self,
        etype: str,
        project_id: int,
        page_size: int,
        page_token: str,
        *,
        session_id: int = 0,
        name: str = "",
    ) -> Page[Entity]:
        clean_type = _entity_type("type", etype, required=False)
        v.name("name", name, required=False)
        # Any spelling of the name: its key under each type it may be.
        keys = sorted({name_key(name, t) for t in ([clean_type] if clean_type else ENTITY_TYPES)})
        keys = keys if name.strip() else []
        v.positive_id("project_id", project_id, required=False)
        v.positive_id("session_id", session_id, required=False)
        if project_id and session_id:
            raise InvalidArgument(
                "set project_id or session_id, not both: they name two graphs",
                fields=("project_id", "session_id"),
            )
        size = paging.page_size(page_size)
        after = paging.decode_token(page_token)
        tenant = tenancy.visible()
        rows = await self.db.read(
            lambda c: c.graph.list_entities(
                clean_type,
                project_id,
                after,
                size + 1,
                session_id=session_id,
                tenant=tenant,
                keys=keys,
            )
        )
        return paging.page(rows, size)

    async def list_aliases(
        self, entity_id: int, page_size: int, page_token: str
    ) -> Page[EntityAlias]:
        """Every surface name of an entity and how it was resolved to it."""
        v.positive_id("entity_id", entity_id)
        size = paging.page_size(page_size)
        after = paging.decode_token(page_token)
        tenant = tenancy.visible()

        def read(uow: UnitOfWork) -> list[EntityAlias]:
            uow.graph.get_entity(entity_id, tenant)
            return uow.graph.list_aliases(entity_id, after, size + 1)

        return paging.page(await self.db.read_in_transaction(read), size)

    # Relationships ----------------------------------------------------------

    async def upsert_relationship(
        self,
        from_id: int,
        to_id: int,
        label: str,
        notes: str,
        valid_time: float | None = None,
        invalid_time: float | None = None,
    ) -> Relationship:
        """One more assertion of (from, label, to), holding from ``valid_time``
        (now when unset) until ``invalid_time`` (when given): the fact's
        interval at that time."""
        v.positive_id("from_id", from_id)
        v.positive_id("to_id", to_id)
        if from_id == to_id:
            raise InvalidArgument(
                "from_id and to_id must be different entities", fields=("from_id", "to_id")
            )
        clean_label = _label(label)
        clean_notes = _notes(notes)
        at = time.time() if valid_time is None else _valid_time("valid_time", valid_time)
        until = None if invalid_time is None else _valid_time("invalid_time", invalid_time)
        if until is not None and until <= at:
            raise InvalidArgument(
                "invalid_time must be after valid_time (and after now when valid_time is unset)",
                field="invalid_time",
            )

        tenant = tenancy.visible()

        def write(uow: UnitOfWork) -> Relationship:
            graphs = []
            for field, entity_id in (("from_id", from_id), ("to_id", to_id)):
                graph = uow.graph.entity_graph(entity_id, tenant)
                if graph is None:
                    raise NotFound(
                        f"{field}: entity {entity_id} does not exist",
                        resource_type="entity",
                        resource_name=entity_id,
                    )
                graphs.append(graph)
            if graphs[0] != graphs[1]:
                raise FailedPrecondition(
                    f"entity {from_id} belongs to {_graph_name(graphs[0])} and entity {to_id} to"
                    f" {_graph_name(graphs[1])}; a relationship joins entities of one project"
                    " (or of one session outside any project)"
                )
            uow.graph.add_evidence(from_id, to_id, clean_label, ASSERT, at, notes=clean_notes)
            if until is not None:
                uow.graph.add_evidence(from_id, to_id, clean_label, END, until)
            facts.rederive(uow, [(from_id, clean_label)], facts.single_valued(uow, graphs[0]))
            found = uow.graph.relationship_at(from_id, to_id, clean_label, at)
            assert found is not None  # an assertion always yields its interval
            return found

        return await self.db.write(write)

    async def list_relationships(
        self,
        entity_id: int,
        include_inbound: bool,
        page_size: int = 0,
        page_token: str = "",
        *,
        as_of: float | None = None,
        include_history: bool = False,
    ) -> Page[Relationship]:
        v.positive_id("entity_id", entity_id)
        when = _when(as_of, include_history)
        size = paging.page_size(page_size)
        after = paging.decode_token(page_token)

        tenant = tenancy.visible()

        def read(uow: UnitOfWork) -> list[Relationship]:
            uow.graph.get_entity(entity_id, tenant)
            return uow.graph.list_relationships(
                entity_id, include_inbound, after_id=after, limit=size + 1, when=when
            )

        return paging.page(await self.db.read_in_transaction(read), size)

    async def delete_relationship(self, from_id: int, to_id: int, label: str) -> None:
        v.positive_id("from_id", from_id)
        v.positive_id("to_id", to_id)
        clean_label = _label(label)
        tenant = tenancy.visible()

        def write(uow: UnitOfWork) -> bool:
            # Both ends are of one graph; another tenant's reads as no relationship.
            graph = uow.graph.entity_graph(from_id, tenant)
            if graph is None:
                return False
            # Every interval of it goes, with the evidence behind them: an
            # operator removing a wrong fact. What it had ended holds again.
            deleted = uow.graph.delete_relationships(from_id, to_id, clean_label)
            facts.rederive(uow, [(from_id, clean_label)], facts.single_valued(uow, graph))
            return deleted > 0

        deleted = await self.db.write(write)
        if not deleted:
            raise NotFound(
                f"no relationship {from_id} -[{clean_label}]-> {to_id}",
                resource_type="relationship",
                resource_name=f"{from_id} -[{clean_label}]-> {to_id}",
            )

    # Traversal --------------------------------------------------------------

    async def neighborhood(
        self,
        entity_id: int,
        depth: int,
        *,
        as_of: float | None = None,
        include_history: bool = False,
    ) -> Subgraph:
        v.positive_id("entity_id", entity_id)
        when = _when(as_of, include_history)
        if depth == 0:
            depth = 1
        if not 1 <= depth <= MAX_DEPTH:
            raise InvalidArgument(
                f"depth must be between 1 and {MAX_DEPTH}, got {depth}", field="depth"
            )
        tenant = tenancy.visible()

        def read(uow: UnitOfWork) -> tuple[list[Entity], list[Relationship]]:
            # The walk never leaves the seed's graph (edges join one graph),
            # so the seed's tenant is the whole answer's.
            uow.graph.get_entity(entity_id, tenant)
            return uow.graph.neighborhood(entity_id, depth, when)

        nodes, edges = await self.db.read_in_transaction(read)
        return Subgraph(nodes, edges)

    async def neighbors(
        self,
        entity_ids: Sequence[int],
        *,
        as_of: float | None = None,
        include_history: bool = False,
    ) -> Subgraph:
        when = _when(as_of, include_history)
        if not entity_ids:
            raise InvalidArgument("entity_ids must name at least one entity", field="entity_ids")
        if len(entity_ids) > MAX_NEIGHBOR_SEEDS:
            raise InvalidArgument(
                f"entity_ids has {len(entity_ids)} ids; the limit is {MAX_NEIGHBOR_SEEDS}",
                field="entity_ids",
            )
        for i in entity_ids:
            v.positive_id("entity_ids", i)
        seeds = list(dict.fromkeys(entity_ids))

        tenant = tenancy.visible()

        def read(uow: UnitOfWork) -> tuple[list[Entity], list[Relationship]]:
            present = uow.graph.get_entities(seeds, tenant)
            missing = [i for i in seeds if i not in present]
            if missing:
                shown = ", ".join(str(i) for i in missing[:10])
                raise NotFound(
                    f"entity_ids: no entity {shown}",
                    resource_type="entity",
                    resource_name=missing[0],
                    details=[ResourceInfo("entity", str(i)) for i in missing[1:10]],
                )
            return uow.graph.neighbors(seeds, when)

        nodes, edges = await self.db.read_in_transaction(read)
        return Subgraph(nodes, edges)

    # Watch ------------------------------------------------------------------

    async def watch(
        self, episode_id: int, session_id: int, project_id: int, after_event_id: int
    ) -> AsyncGenerator[ExtractionEvent, None]:
        """Replay matching events after the cursor from SQLite, then live ones.

        One cursor, one query loop: the replay and the live phase are the same
        read, so there is no gap and no duplicate between them.  At most one
        page is held at a time, and each event is yielded lazily, so a slow
        reader is throttled by gRPC flow control instead of growing memory.
        """
        for field, value in (
            ("episode_id", episode_id),
            ("session_id", session_id),
            ("project_id", project_id),
            ("after_event_id", after_event_id),
        ):
            v.positive_id(field, value, required=False)
        if sum(1 for x in (episode_id, session_id, project_id) if x) > 1:
            raise InvalidArgument(
                "give at most one of episode_id, session_id or project_id",
                fields=("episode_id", "session_id", "project_id"),
            )
        tenant = tenancy.visible()
        await self.db.read_in_transaction(
            lambda c: _check_watch_target(c, episode_id, session_id, project_id, tenant)
        )
        # With or without a filter, a watcher hears only its tenant's events.
        where = EventFilter(episode_id, session_id, project_id, tenant)
        cursor = after_event_id
        while not self.events.closed:
            woken = self.events.current()  # before the read: no lost wake-up
            if self.event_retention is not None:
                kept = event_retention.oldest_kept(time.time(), self.event_retention)
                where = replace(where, since=kept)
            page = await self.db.read(functools.partial(_events_after, after=cursor, where=where))
            for event in page:
                cursor = event.id
                yield _visible(event)
            if not page:
                await self.events.wait(woken, WATCH_POLL_SECONDS)


#: What a watcher that may not act for the session's user reads in place of
#: a failed formation's error (which may count that user's memories).
WITHHELD = "memory formation failed; its detail is shown only to keys that may act for the user"


def _events_after(uow: UnitOfWork, after: int, where: EventFilter) -> list[ExtractionEvent]:
    return uow.events.page_after(after, where, WATCH_PAGE)


def _visible(event: ExtractionEvent) -> ExtractionEvent:
    """The event as this watcher may see it. A memory formation for a user the
    key may not act for shows none of its detail: not the operations, not how
    many there were, not the LLM calls, which would tell whether that user
    already holds a similar memory (a user's memories never reach another
    user, on streams either). An event recorded before formation named its
    user ("user_id" absent) shows its detail only to keys that may act for
    every user. Operations on another user's USER memories are left out in
    any case."""
    formed = event.payload.get("formation")
    if not formed:
        return event
    owner = formed.get("user_id")
    if owner is None:
        allowed = tenancy.may_act_for_all()
    else:
        allowed = not owner or tenancy.may_act_for(owner)
    if not allowed:
        return replace(
            event,
            error=WITHHELD if event.error else "",
            payload={k: val for k, val in event.payload.items() if k != "formation"},
        )
    operations = [
        op
        for op in formed.get("operations", [])
        if not op.get("user_id") or tenancy.may_act_for(op["user_id"])
    ]
    return replace(
        event, payload={**event.payload, "formation": {**formed, "operations": operations}}
    )


def _check_watch_target(
    uow: UnitOfWork, episode_id: int, session_id: int, project_id: int, tenant: str | None
) -> None:
    if episode_id:
        try:
            uow.episodes.get(episode_id, tenant)
        except NotFound:
            # A deleted episode's events can still be replayed.
            if not uow.events.any_for_episode(episode_id, tenant):
                raise
    if session_id:
        uow.sessions.get(session_id, tenant)
    if project_id and not uow.projects.exists(project_id, tenant):
        raise NotFound(
            f"project {project_id} does not exist",
            resource_type="project",
            resource_name=project_id,
        )
