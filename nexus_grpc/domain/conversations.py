"""Projects, sessions and episodes: the conversation record."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nexus_grpc.core import documents, jobs, tenancy
from nexus_grpc.core.erasure import PROJECT as PROJECT_ERASURE
from nexus_grpc.core.erasure import Erasure, Target
from nexus_grpc.core.models import (
    Episode,
    MemoryFormation,
    NewEpisode,
    Page,
    Project,
    Session,
    episode_text,
)
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import erasure as erasing
from nexus_grpc.domain import facts, inline_vectors, paging, retention
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.episode_followups import queue_followups
from nexus_grpc.domain.inline_vectors import InlineVectors
from nexus_grpc.domain.session_rights import require_may_write
from nexus_grpc.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NexusError,
    NotFound,
)

PROJECT_FIELDS = (
    "name",
    "description",
    "colour",
    "icon",
    "notes",
    "system_prompt",
    "retention",
    "single_valued_labels",
    "memory_formation",
)
# A field's value when a create or update leaves it out.
_PROJECT_UNSET: dict[str, Any] = {
    "retention": None,
    "single_valued_labels": (),
    "memory_formation": 0,
}
# The longest retention accepted: beyond it "for ever" is what the caller means.
MAX_RETENTION_SECONDS = 100 * 365.25 * 86_400
SESSION_FIELDS = ("name", "project_id", "metadata")


def _project_values(values: Mapping[str, Any]) -> dict[str, Any]:
    checked: dict[str, Any] = {}
    for name, value in values.items():
        if name == "retention":
            checked[name] = _retention(value)
        elif name == "single_valued_labels":
            checked[name] = facts.check_labels(f"project.{name}", value)
        elif name == "memory_formation":
            checked[name] = _memory_formation(value)
        elif name in ("name", "colour", "icon"):
            checked[name] = v.name(f"project.{name}", value, required=name == "name")
        else:
            checked[name] = v.text(f"project.{name}", value, limit=v.MAX_SHORT_TEXT_CHARS)
    return checked


def _memory_formation(value: int | None) -> int | None:
    """A project's formation setting; unset (0) is the default."""
    if not value:
        return None
    if value not in {int(m) for m in MemoryFormation}:
        raise InvalidArgument(
            f"project.memory_formation must be OFF, USER or USER_AND_PROJECT, got {value}",
            field="project.memory_formation",
        )
    return int(value)


def _retention(value: float | None) -> float | None:
    """A project's retention in seconds; None keeps everything for ever."""
    if value is None:
        return None
    if not 0 < value <= MAX_RETENTION_SECONDS:
        raise InvalidArgument(
            f"project.retention must be positive and at most 100 years, got {value:.0f} seconds"
            " (leave it unset to keep everything)",
            field="project.retention",
        )
    if value != int(value):
        # Sub-second retention means nothing, and whole seconds come back exact.
        raise InvalidArgument(
            f"project.retention must be whole seconds, got {value} seconds",
            field="project.retention",
        )
    return value


def _check_retry(
    existing: Episode,
    session: Session,
    request_id: str,
    user_message: str,
    ai_response: str,
    metadata: Mapping[str, Any],
    project_id: int,
    occur_at: float | None = None,
) -> None:
    """A request_id replays the first call only for that same call (AIP-155):
    the same request again gets the first episode; a different one reusing
    the id is refused, as CreateMemory does, instead of being answered with
    an episode that is not what it asked to store."""
    differs = [
        name
        for name, old, new in (
            ("user_message", existing.user_message, user_message),
            ("ai_response", existing.ai_response, ai_response),
            ("metadata", existing.metadata, dict(metadata)),
        )
        if old != new
    ]
    if project_id and session.project_id != project_id:
        differs.append("project_id")
    # An unset occur_time means "now", which a retry cannot repeat: only a
    # given one is compared.
    if occur_at is not None and existing.occur_at != occur_at:
        differs.append("occur_time")
    if differs:
        raise AlreadyExists(
            f"request_id {v.quoted(request_id)} was already used in session {session.id} for"
            f" episode {existing.id}, with a different {', '.join(differs)}"
        )


def _check_same_tenant(
    uow: UnitOfWork, session: Session, project_id: int, field: str, tenant: str | None
) -> None:
    """A session joins only a project of its own tenant: everything under a
    project must stay in one tenant."""
    if not uow.projects.exists(project_id, tenant):
        raise FailedPrecondition(f"{field} {project_id} does not exist")
    if uow.projects.tenant_of(project_id) != session.tenant:
        # Only a caller who sees every tenant (an admin) gets here.
        raise FailedPrecondition(
            f"{field} {project_id} belongs to another tenant than session {session.id};"
            " a session joins only a project of its own tenant"
        )


def _check_owners(holding: str, owners: Mapping[str, int], what: str = "memories") -> None:
    """Refuses (FAILED_PRECONDITION) a delete that would take USER memories of
    a user the caller's key may not act for: DeleteMemory would not let it
    remove them one by one, and a cascade must not be a way around that. The
    message counts those memories and names only users the key may act for:
    another user's name is theirs, not something a refusal may reveal."""
    others = {u: n for u, n in owners.items() if not tenancy.may_act_for(u)}
    if not others:
        return
    mine = sorted(u for u in owners if u not in others)
    named = (
        f", and {sum(owners[u] for u in mine)} of users it may act for"
        f" ({', '.join(map(repr, mine))})"
        if mine
        else ""
    )
    raise FailedPrecondition(
        f"{holding}: {sum(others.values())} of users this key may not act for{named}."
        f" Those users' {what} must be deleted first, with a key that may act"
        " for them (or an admin key); nothing was deleted"
    )


@dataclass(frozen=True)
class EpisodeInput:
    """One episode to store: CreateEpisode's fields, or one ImportEpisodes item."""

    session_id: int
    user_message: str
    ai_response: str
    metadata: Mapping[str, Any]
    request_id: str
    project_id: int = 0
    occur_at: float | None = None


@dataclass(frozen=True)
class Imported:
    """An imported item's episode; ``replayed``: its request_id was already
    stored with the same content, so nothing new was written."""

    episode_id: int
    replayed: bool


def _checked(item: EpisodeInput) -> EpisodeInput:
    """The item validated, with its metadata normalised; INVALID_ARGUMENT
    naming the first bad field."""
    v.positive_id("session_id", item.session_id)
    v.occur_time("occur_time", item.occur_at)
    v.text("user_message", item.user_message, limit=v.MAX_MESSAGE_CHARS, required=True)
    v.text("ai_response", item.ai_response, limit=v.MAX_MESSAGE_CHARS)
    # An identifier, as a memory's request_id is: " r1" and "r1" must not
    # be one retry key to the client and two to the server.
    v.identifier("request_id", item.request_id)
    v.positive_id("project_id", item.project_id, required=False)
    return replace(item, metadata=v.metadata("metadata", item.metadata))


def _import_in(
    uow: UnitOfWork, items: list[tuple[int, EpisodeInput]], tenant: str | None
) -> list[tuple[int, Imported | NexusError]]:
    """An import batch in the writer's transaction, in two steps: each item is
    resolved against the database as CreateEpisode would (its session, a
    replay of its request_id, attaching the session to project_id) inside
    its own savepoint, so a bad item fails alone; then the items to store are
    inserted together (``episode_store.insert_many``)."""
    outcomes: list[tuple[int, Imported | NexusError]] = []
    to_insert: list[tuple[int, EpisodeInput]] = []
    at = time.time()
    # Items of this batch not yet inserted, by retry key: a second item with
    # the same request_id replays the first, as it would one by one.
    pending: dict[tuple[int, str], tuple[int, EpisodeInput]] = {}
    replays: list[tuple[int, int]] = []  # (item, the earlier item it replays)
    acts_for: dict[int, str] = {}  # item: the user its episode is written for
    for i, item in items:
        try:
            with uow.savepoint("import_item"):
                session = uow.sessions.get(item.session_id, tenant, retained_at=at)
                require_may_write(session)
                erasing.refuse_while_forgetting(uow, session.tenant, session.user_id)
                key = (item.session_id, item.request_id)
                earlier = pending.get(key)
                existing = None if earlier else uow.episodes.find_by_request_id(*key)
                if earlier is None and existing is None:
                    erasing.refuse_buried(
                        uow,
                        erasing.episode_request(uow, session.id, item.request_id, create=False),
                        item.request_id,
                    )
                if earlier is not None:
                    _check_pending_retry(earlier[1], item, session)
                    replays.append((i, earlier[0]))
                elif existing is not None:
                    _check_retry(
                        existing,
                        session,
                        item.request_id,
                        item.user_message,
                        item.ai_response,
                        item.metadata,
                        item.project_id,
                        item.occur_at,
                    )
                    outcomes.append((i, Imported(existing.id, True)))
                else:
                    _attach_project(uow, session, item.project_id, tenant)
                    # Checked above: the caller may act for the session's user.
                    acts_for[i] = session.user_id
                    pending[key] = (i, item)
                    to_insert.append((i, item))
        except NexusError as exc:
            outcomes.append((i, exc))
    ids = uow.episodes.insert_many(
        [
            NewEpisode(
                item.session_id,
                item.user_message,
                item.ai_response,
                item.metadata,
                item.request_id,
                item.occur_at,
                acts_for=acts_for[i],
            )
            for i, item in to_insert
        ]
    )
    stored = uow.episodes.get_many(ids)
    queue_followups(uow, [stored[i] for i in ids], jobs.BULK)
    inserted = {i: episode_id for (i, _), episode_id in zip(to_insert, ids, strict=True)}
    outcomes.extend((i, Imported(episode_id, False)) for i, episode_id in inserted.items())
    outcomes.extend((i, Imported(inserted[first], True)) for i, first in replays)
    return outcomes


def _check_pending_retry(first: EpisodeInput, item: EpisodeInput, session: Session) -> None:
    """An item reusing the request_id of an earlier item of the same batch,
    judged as ``_check_retry`` judges a stored episode."""
    differs = [
        name
        for name in ("user_message", "ai_response", "metadata")
        if getattr(first, name) != getattr(item, name)
    ]
    if item.project_id and item.project_id != (first.project_id or session.project_id):
        differs.append("project_id")
    if item.occur_at is not None and item.occur_at != first.occur_at:
        differs.append("occur_time")
    if differs:
        raise AlreadyExists(
            f"request_id {v.quoted(item.request_id)} was already used in session {session.id}"
            f" by an earlier episode of this import, with a different {', '.join(differs)}"
        )


def _attach_project(uow: UnitOfWork, session: Session, project_id: int, tenant: str | None) -> None:
    """CreateEpisode's project_id: attaches a session that has no project yet."""
    if not project_id or session.project_id == project_id:
        return
    if session.project_id:
        raise FailedPrecondition(
            f"session {session.id} belongs to project {session.project_id},"
            f" not project_id {project_id}"
        )
    _check_same_tenant(uow, session, project_id, "project_id", tenant)
    uow.sessions.update(session.id, {"project_id": project_id})
    _session_moved(uow, session.id, project_id)


def _session_moved(uow: UnitOfWork, session_id: int, project_id: int) -> None:
    """A session just moved to ``project_id`` (0: out of any): its summaries
    carry the project in their vector payload, and the project's retention
    sweep now looks at what came in."""
    summaries = uow.summaries.ids_of_session(session_id)
    if summaries:
        uow.jobs.enqueue(jobs.INDEX_SUMMARY, summaries)
    retention.session_moved(uow, project_id, time.time())


def _create_in(
    uow: UnitOfWork,
    item: EpisodeInput,
    tenant: str | None,
    priority: int,
    vector: list[float] | None = None,
) -> tuple[Episode, bool]:
    """Store a checked episode in the writer's transaction: (episode, whether
    it was a replay of its request_id). ``vector``: the episode's embedding,
    stored beside the row in this transaction (domain/inline_vectors.py);
    None queues its index job."""
    session = uow.sessions.get(item.session_id, tenant, retained_at=time.time())
    require_may_write(session)
    erasing.refuse_while_forgetting(uow, session.tenant, session.user_id)
    if item.request_id:
        existing = uow.episodes.find_by_request_id(item.session_id, item.request_id)
        if existing is None:
            erasing.refuse_buried(
                uow,
                erasing.episode_request(uow, session.id, item.request_id, create=False),
                item.request_id,
            )
        if existing is not None:
            _check_retry(
                existing,
                session,
                item.request_id,
                item.user_message,
                item.ai_response,
                item.metadata,
                item.project_id,
                item.occur_at,
            )
            return existing, True
    _attach_project(uow, session, item.project_id, tenant)
    episode = uow.episodes.insert(
        item.session_id,
        item.user_message,
        item.ai_response,
        item.metadata,
        item.request_id,
        item.occur_at,
        embedded=vector is not None,
        acts_for=session.user_id,  # require_may_write passed
    )
    [episode] = queue_followups(uow, [episode], priority, embedded=vector is not None)
    if vector is not None:
        InlineVectors.put(
            uow,
            inline_vectors.EPISODES,
            episode.id,
            vector,
            documents.episode_payload(episode.session_id, episode.created_at, episode.occur_at),
        )
    return episode, False


class Conversations:
    def __init__(
        self,
        db: Database,
        signals: JobSignals,
        default_tenant: str = tenancy.DEFAULT_TENANT,
        inline: InlineVectors | None = None,
        scrub_delay: float = erasing.SCRUB_DELAY,
    ) -> None:
        self.db = db
        self.signals = signals
        self.default_tenant = default_tenant
        # How soon after a delete its bytes are scrubbed off the disk.
        self.scrub_delay = scrub_delay
        # Set where vectors live in the database's own tables (pgvector): a new
        # episode's vector is then written in its row's transaction.
        self.inline = inline

    # Projects -------------------------------------------------------------

    async def create_project(self, values: Mapping[str, Any]) -> Project:
        checked = _project_values(
            {f: values.get(f, _PROJECT_UNSET.get(f, "")) for f in PROJECT_FIELDS}
        )
        tenant = tenancy.creator(self.default_tenant)

        def create(uow: UnitOfWork) -> Project:
            project = uow.projects.insert(checked, tenant)
            if project.retention is not None:
                retention.start(uow, project.id, project.created_at)
            return project

        project = await self.db.write(create)
        self.signals.wake(jobs.RETAIN_PROJECT)
        return project

    async def get_project(self, project_id: int) -> Project:
        v.positive_id("id", project_id)
        tenant = tenancy.visible()
        return await self.db.read(lambda c: c.projects.get(project_id, tenant))

    async def list_projects(self, page_size: int, page_token: str) -> Page[Project]:
        size = paging.page_size(page_size)
        after = paging.decode_token(page_token)
        tenant = tenancy.visible()
        rows = await self.db.read(lambda c: c.projects.list_page(after, size + 1, tenant))
        return paging.page(rows, size)

    async def update_project(
        self, project_id: int, values: Mapping[str, Any], mask: list[str]
    ) -> Project:
        v.positive_id("project.id", project_id)
        paths = v.update_mask(mask, PROJECT_FIELDS)
        checked = _project_values({p: values.get(p, _PROJECT_UNSET.get(p, "")) for p in paths})
        tenant = tenancy.visible()

        def update(uow: UnitOfWork) -> Project:
            project = uow.projects.update(project_id, checked, tenant)
            if checked.get("retention") is not None:
                retention.start(uow, project_id, time.time())
            return project

        project = await self.db.write(update)
        self.signals.wake(jobs.RETAIN_PROJECT)
        return project

    async def delete_project(self, project_id: int, principal: str = "") -> Erasure:
        """Delete a project and everything in it, as durable work: an erasure
        of kind PROJECT (domain/erasure.py) that takes its sessions, episodes,
        memories, graph, summaries and events in steps and then scrubs the
        disk. From the commit of this call on, no read sees the project or
        its sessions.

        USER memories and sessions of its users belong to those users:
        DeleteMemory and DeleteSession let only a key that may act for a user
        remove theirs, and the cascade must not be a way around that. So the
        delete is refused (FAILED_PRECONDITION) while the project holds a
        session or USER memory of a user the key may not act for, rather
        than deleting only some. The message names only users the key may
        act for, and counts the rest.
        """
        v.positive_id("id", project_id)
        tenant = tenancy.visible()

        def delete(uow: UnitOfWork) -> Erasure:
            project = uow.projects.get(project_id, tenant)
            owners = uow.projects.user_memory_owners(project_id)
            _check_owners(f"project {project_id} still holds USER memories", owners)
            users = uow.projects.session_users(project_id)
            _check_owners(f"project {project_id} still holds sessions", users, "sessions")
            target = Target(project.tenant, PROJECT_ERASURE, project_id=project_id)
            return erasing.start(uow, target, principal)

        erasure = await self.db.write(delete)
        self.signals.wake(jobs.ERASE)
        return erasure

    # Sessions -------------------------------------------------------------

    async def create_session(
        self,
        external_id: str,
        name: str,
        project_id: int,
        metadata: Mapping[str, Any],
        *,
        user_id: str = "",
        agent_id: str = "",
    ) -> Session:
        ext = v.external_id(external_id)
        v.name("session.name", name)
        v.positive_id("session.project_id", project_id, required=False)
        meta = v.metadata("session.metadata", metadata)
        # Who the conversation is with: checked like a memory's owner (the
        # auth interceptor refuses a user_id the key may not act for).
        v.identifier("session.user_id", user_id)
        v.identifier("session.agent_id", agent_id)

        visible = tenancy.visible()
        tenant = tenancy.creator(self.default_tenant)

        def create(uow: UnitOfWork) -> Session:
            owner = tenant
            if project_id:
                if not uow.projects.exists(project_id, visible):
                    raise FailedPrecondition(f"session.project_id {project_id} does not exist")
                # A session in a project belongs to the project's tenant.
                owner = uow.projects.tenant_of(project_id) or tenant
            erasing.refuse_while_forgetting(uow, owner, user_id)
            return uow.sessions.insert(
                ext, name, project_id, meta, owner, user_id=user_id, agent_id=agent_id
            )

        return await self.db.write(create)

    async def get_session(
        self, session_id: int = 0, external_id: str = "", tenant_name: str = ""
    ) -> Session:
        """By id, among the tenants the caller sees; by external_id, in the
        caller's own tenant (an admin's too), or the one ``tenant_name`` names
        (an admin key only; with an id it names nothing). External ids are
        unique per tenant only: a lookup across tenants would pick one of
        several, and an import resolving its sessions that way wrote into
        another tenant's."""
        tenant = tenancy.visible()
        at = time.time()  # a session past its project's retention is gone
        if "\x00" in tenant_name:  # as in every string; otherwise unused with an id
            raise InvalidArgument("tenant must not contain NUL characters", field="tenant")
        if external_id:
            ext = v.external_id(external_id)
            if tenant_name:
                v.identifier("tenant", tenant_name)
            home = tenancy.named(tenant_name, self.default_tenant)
            return await self.db.read(
                lambda c: c.sessions.get_by_external_id(ext, home, retained_at=at)
            )
        if session_id:
            v.positive_id("id", session_id)
            return await self.db.read(lambda c: c.sessions.get(session_id, tenant, retained_at=at))
        raise InvalidArgument("one of id or external_id is required", fields=("id", "external_id"))

    async def list_sessions(
        self, page_size: int, page_token: str, project_id: int
    ) -> Page[Session]:
        size = paging.page_size(page_size)
        after = paging.decode_token(page_token)
        v.positive_id("project_id", project_id, required=False)
        tenant = tenancy.visible()
        at = time.time()
        rows = await self.db.read(
            lambda c: c.sessions.list_page(after, size + 1, project_id, tenant, retained_at=at)
        )
        return paging.page(rows, size)

    async def update_session(
        self, session_id: int, values: Mapping[str, Any], mask: list[str]
    ) -> Session:
        v.positive_id("session.id", session_id)
        paths = v.update_mask(mask, SESSION_FIELDS)
        changes: dict[str, Any] = {}
        for path in paths:
            if path == "name":
                changes["name"] = v.name("session.name", values["name"])
            elif path == "project_id":
                changes["project_id"] = v.positive_id(
                    "session.project_id", values["project_id"], required=False
                )
            else:
                changes["metadata"] = v.metadata("session.metadata", values["metadata"])

        tenant = tenancy.visible()

        def update(uow: UnitOfWork) -> Session:
            session = uow.sessions.get(session_id, tenant)
            require_may_write(session, "change")
            new_project = changes.get("project_id")
            if new_project:
                _check_same_tenant(uow, session, new_project, "session.project_id", tenant)
            updated = uow.sessions.update(session_id, changes, tenant)
            if "project_id" in changes:
                _session_moved(uow, session_id, changes["project_id"])
            return updated

        session = await self.db.write(update)
        if "project_id" in changes:
            self.signals.wake(jobs.INDEX_SUMMARY, jobs.RETAIN_PROJECT)
        return session

    async def delete_session(self, session_id: int) -> int:
        """Delete a session, its episodes, summaries and own graph, and its
        TASK-tier memories, which live only as long as it does. A USER one of
        a user the key may not act for refuses the delete (FAILED_PRECONDITION,
        counted), as DeleteProject is refused, and for the same reason:
        DeleteMemory would not let this key remove it."""
        v.positive_id("id", session_id)
        tenant = tenancy.visible()

        def delete(uow: UnitOfWork) -> int:
            require_may_write(uow.sessions.get(session_id, tenant), "delete")
            owners = uow.sessions.task_memory_owners(session_id)
            _check_owners(f"session {session_id} still holds TASK-tier USER memories", owners)
            episodes = uow.erasures.episodes_in_sessions([session_id], erasing.NO_LIMIT)
            erasing.forget_episodes(uow, episodes, whole_sessions=True)
            erasing.remove_session(uow, session_id, tenant)
            erasing.scrub_soon(uow, self.scrub_delay)
            return len(episodes)

        deleted = await self.db.write(delete)
        self.signals.wake(
            jobs.INDEX_EPISODE, jobs.INDEX_SUMMARY, jobs.INDEX_MEMORY, jobs.INDEX_ENTITY
        )
        return deleted

    # Episodes -------------------------------------------------------------

    async def create_episode(
        self,
        session_id: int,
        user_message: str,
        ai_response: str,
        metadata: Mapping[str, Any],
        request_id: str,
        project_id: int = 0,
        occur_at: float | None = None,
    ) -> Episode:
        item = EpisodeInput(
            session_id, user_message, ai_response, metadata, request_id, project_id, occur_at
        )
        checked = _checked(item)
        tenant = tenancy.visible()
        vector = None
        if self.inline is not None:
            text = episode_text(checked.user_message, checked.ai_response)
            vector = await self.inline.embed(text)
        episode, _ = await inline_vectors.write_with(
            self.db, vector, lambda c, vec: _create_in(c, checked, tenant, jobs.LIVE, vec)
        )
        self.signals.wake(jobs.INDEX_EPISODE, jobs.EXTRACT_EPISODE, jobs.SUMMARIZE_SESSION)
        return episode

    async def import_episodes(
        self, items: Sequence[EpisodeInput | NexusError]
    ) -> list[Imported | NexusError]:
        """One batch of an import: every item is checked and written as
        CreateEpisode would (a request_id is required), all in one
        transaction, each inside its own savepoint, so a bad item is that
        item's error and writes nothing while the others are written. The
        jobs are queued at BULK priority, behind live traffic's.

        An item may arrive already failed (its conversion from the wire
        failed): it is handed back as it is."""
        outcomes: list[Imported | NexusError | None] = []
        checked: list[tuple[int, EpisodeInput]] = []
        for i, item in enumerate(items):
            if isinstance(item, NexusError):
                outcomes.append(item)
                continue
            try:
                if not item.request_id:
                    raise InvalidArgument(
                        "request_id is required for an imported episode, so that"
                        " resending the import is safe",
                        field="request_id",
                    )
                checked.append((i, _checked(item)))
                outcomes.append(None)
            except NexusError as exc:
                outcomes.append(exc)
        # A bulk import writes only into the key's own tenant, an admin
        # key's too: another tenant's session answers as a missing one.
        tenant = tenancy.own(self.default_tenant) if tenancy.caller() else None

        def write(uow: UnitOfWork) -> list[tuple[int, Imported | NexusError]]:
            return _import_in(uow, checked, tenant)

        if checked:
            for i, outcome in await self.db.write(write):
                outcomes[i] = outcome
            self.signals.wake(jobs.INDEX_EPISODE, jobs.EXTRACT_EPISODE, jobs.SUMMARIZE_SESSION)
        return [o for o in outcomes if o is not None]

    async def get_episode(self, episode_id: int) -> Episode:
        v.positive_id("id", episode_id)
        tenant = tenancy.visible()
        at = time.time()

        def read(uow: UnitOfWork) -> Episode:
            episode = uow.episodes.get(episode_id, tenant)
            cutoff = uow.episodes.retention_cutoff(episode.session_id, at)
            if cutoff is not None and episode.occur_at < cutoff:
                # Past the project's retention: gone, as a deleted one is.
                raise NotFound(
                    f"episode {episode_id} does not exist",
                    resource_type="episode",
                    resource_name=episode_id,
                )
            return episode

        return await self.db.read(read)

    async def list_episodes(
        self, session_id: int, page_size: int, page_token: str
    ) -> Page[Episode]:
        v.positive_id("session_id", session_id)
        size = paging.page_size(page_size)
        before = paging.decode_token(page_token)

        tenant = tenancy.visible()

        at = time.time()

        def read(uow: UnitOfWork) -> list[Episode]:
            uow.sessions.get(session_id, tenant, retained_at=at)
            cutoff = uow.episodes.retention_cutoff(session_id, at)
            return uow.episodes.list_page(session_id, before, size + 1, cutoff)

        rows = await self.db.read_in_transaction(read)
        return paging.page(rows, size)

    async def delete_episode(self, episode_id: int) -> None:
        v.positive_id("id", episode_id)
        tenant = tenancy.visible()

        def delete(uow: UnitOfWork) -> None:
            episode = uow.episodes.get(episode_id, tenant)
            require_may_write(uow.sessions.get(episode.session_id), "delete from")
            erasing.forget_episodes(uow, [episode_id])
            erasing.scrub_soon(uow, self.scrub_delay)

        await self.db.write(delete)
        self.signals.wake(
            jobs.INDEX_EPISODE, jobs.INDEX_ENTITY, jobs.INDEX_SUMMARY, jobs.SUMMARIZE_SESSION
        )
