"""Curated PROJECT and USER memories: CRUD, the cap, and SearchMemories.

Ownership rules for id-addressed calls: a USER memory is read, changed or
deleted only with its own ``user_id``; with any other (or none) the answer is
NOT_FOUND, exactly as for an id that does not exist, so a caller cannot probe
for other users' memories.  Scoped calls (list, search, selection) see only
what ``memory_scope`` allows.

A PROJECT memory needs an existing project, and a memory stored with a
session needs an existing session: otherwise FAILED_PRECONDITION (the
request is well-formed; the world is not in the state it needs).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from nexus_grpc.core import documents, jobs, tenancy
from nexus_grpc.core.models import MemoryKind, Page, Tier
from nexus_grpc.core.records import GONE, ChangedBy, Memory, MemoryUsage, Revision, UsageOwner
from nexus_grpc.core.records import UPDATE as REVISED
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import erasure as erasing
from nexus_grpc.domain import inline_vectors, memory_upkeep, paging
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.inline_vectors import InlineVectors
from nexus_grpc.domain.memory_visibility import (
    SESSION_TIERS,
    MemoryScope,
    check_scope,
)
from nexus_grpc.embedding import Embedder
from nexus_grpc.errors import (
    AlreadyExists,
    ErrorInfo,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    QuotaViolation,
)
from nexus_grpc.vectors import VectorIndex

log = logging.getLogger(__name__)
MEMORIES = "memories"
# An owner's memories are capped so that selection can read all their titles.
MAX_MEMORIES_PER_PROJECT_AGENT = 1000
MAX_TITLE_CHARS = 500
#: Words of a new memory the same-words check narrows its owner's memories by.
MAX_DEDUP_WORDS = 8
DEFAULT_HISTORY_RETENTION_SECONDS = 30 * 86_400.0
ANONYMOUS = ChangedBy()  # a change made with no request id or principal (tests, tools)
UPDATE_FIELDS = ("title", "content", "tier", "confidence", "metadata", "expire_time")
# The longest ttl accepted: beyond it "never" is what the caller means.
MAX_TTL_SECONDS = 100 * 365 * 86_400.0


def _check_tier(field: str, tier: int, *, default: bool) -> int:
    if tier == 0 and default:
        return int(Tier.LONGTERM)
    if tier not in {int(t) for t in Tier}:
        raise InvalidArgument(
            f"{field} must be TASK, SESSION, LONGTERM or ARCHIVE, got {tier}", field=field
        )
    return tier


def _expiry(expire_time: float | None, ttl: float | None) -> float | None:
    """When a memory expires, from an absolute time or a ttl; None: never."""
    if ttl is not None:
        if math.isnan(ttl) or ttl <= 0:
            raise InvalidArgument(
                f"memory.ttl must be positive, got {ttl} seconds", field="memory.ttl"
            )
        if ttl > MAX_TTL_SECONDS:
            raise InvalidArgument(
                f"memory.ttl is {ttl:.0f} seconds; the limit is {MAX_TTL_SECONDS:.0f}"
                " (100 years): leave it unset for a memory that never expires",
                field="memory.ttl",
            )
        return time.time() + ttl
    if expire_time is not None and expire_time <= time.time():
        raise InvalidArgument(
            "memory.expire_time is in the past: it would expire on arrival",
            field="memory.expire_time",
        )
    return expire_time


def words_key(text: str) -> str:
    """A memory's words, case and punctuation aside: a retried "Postgres runs
    on port 5433." and "postgres runs on port 5433" meet (formation's rule
    for identical memories too)."""
    return " ".join(re.findall(r"\w+", text.lower()))


def _same_words(uow: UnitOfWork, row: Mapping[str, Any], tenant: str) -> Memory | None:
    """The owner's live memory in the same tier that already holds ``row``'s
    words (its title and its content), if there is one.

    The owner is whoever sees the memory: its kind, project, agent and user,
    and for the TASK and SESSION tiers its origin session too."""
    tier = row["tier"]
    title, content = words_key(row["title"]), words_key(row["content"])
    # The content's ASCII words narrow the owner's memories in the database
    # (C, outside the GIL, instead of Python over up to the cap's 1,000 rows),
    # likeliest to be rare first so most rows fail on the first: numbers, then
    # the longest. A text of other scripts alone reads them all.
    ascii_words = sorted(
        {w for w in content.split() if w.isascii()},
        key=lambda w: (any(ch.isdigit() for ch in w), len(w)),
        reverse=True,
    )
    texts = uow.memories.texts_of_owner(
        kind=row["kind"],
        project_id=row["project_id"],
        agent_id=row["agent_id"],
        user_id=row["user_id"],
        tier=tier,
        session_id=row["session_id"] if Tier(tier) in SESSION_TIERS else None,
        tenant=tenant,
        containing=ascii_words[:MAX_DEDUP_WORDS],
    )
    for memory_id, their_title, their_content in texts:
        if words_key(their_content) == content and words_key(their_title) == title:
            return uow.memories.find(memory_id)
    return None


def _check_confidence(field: str, value: float) -> float:
    if math.isnan(value) or value < 0.0 or value > 1.0:
        raise InvalidArgument(f"{field} must be between 0 and 1, got {value}", field=field)
    return value


class Memories:
    def __init__(
        self,
        db: Database,
        signals: JobSignals,
        embedder: Embedder,
        index: VectorIndex,
        *,
        cap: int = MAX_MEMORIES_PER_PROJECT_AGENT,
        default_tenant: str = tenancy.DEFAULT_TENANT,
        history_retention: float = DEFAULT_HISTORY_RETENTION_SECONDS,
        inline: InlineVectors | None = None,
        scrub_delay: float = erasing.SCRUB_DELAY,
    ) -> None:
        self.default_tenant = default_tenant
        # How soon after a delete its bytes are scrubbed off the disk.
        self.scrub_delay = scrub_delay
        # Set where vectors live in the database's own tables (pgvector): a new
        # memory's vector is then written in its row's transaction.
        self.inline = inline
        self.db = db
        # How long a deleted memory's history stays readable by its owner.
        self.history_retention = history_retention
        self.signals = signals
        self.embedder = embedder
        self.index = index
        self.cap = cap

    # CRUD -------------------------------------------------------------------

    async def create(
        self,
        values: Mapping[str, Any],
        request_id: str = "",
        *,
        on_existing: Callable[[str], None] | None = None,
    ) -> Memory:
        """Stores a memory, or answers with the one already there: the first
        memory of a ``request_id`` (a retry), or the owner's live memory in
        the same tier with the same words, case and punctuation aside (a
        retry without a request_id, or a fact told twice), which
        ``on_existing`` then hears about."""
        row = _checked_row(values, request_id)
        kind, title, content = row["kind"], row["title"], row["content"]
        project_id, session_id, user_id = row["project_id"], row["session_id"], row["user_id"]
        tier, agent_id = row["tier"], row["agent_id"]

        visible = tenancy.visible()
        creator = tenancy.creator(self.default_tenant)
        # The memory that already held these words, when the write found one.
        # The write may run again (PostgreSQL retries a lost race): only its
        # last run counts.
        found_same: list[int] = []

        vector = None
        if self.inline is not None:
            vector = await self.inline.embed(documents.memory_text(title, content))

        def write(uow: UnitOfWork, vector: list[float] | None) -> tuple[Memory, bool]:
            found_same.clear()
            tenant = _owner_tenant(uow, project_id, session_id, visible, creator)
            existing = _replayed(uow, row, tenant, request_id)
            if existing is not None:
                return existing, False
            same = _same_words(uow, row, tenant)
            if same is not None:
                found_same.append(same.id)
                return same, False
            if tier != Tier.ARCHIVE:
                self._check_cap(uow, kind, project_id, agent_id, user_id, tenant)
            memory = memory_upkeep.insert(uow, row, request_id, tenant, embedded=vector is not None)
            memory_upkeep.schedule_expiry(uow, memory.id, row.get("expire_at"))
            if vector is not None:
                InlineVectors.put(
                    uow,
                    inline_vectors.MEMORIES,
                    memory.id,
                    vector,
                    documents.memory_payload(
                        memory.kind,
                        memory.tier,
                        memory.project_id,
                        memory.user_id,
                        memory.session_id,
                        memory.agent_id,
                        tenant,
                    ),
                )
            return memory, True

        memory, created = await inline_vectors.write_with(self.db, vector, write)
        if created:
            self.signals.wake(jobs.INDEX_MEMORY, jobs.EXPIRE_MEMORY)
        elif on_existing is not None and found_same == [memory.id]:
            on_existing(
                f"memory {memory.id} already holds these words in this tier; it is"
                " returned and nothing was stored"
            )
        return memory

    def _check_cap(
        self,
        uow: UnitOfWork,
        kind: int,
        project_id: int,
        agent_id: str,
        user_id: str,
        tenant: str,
    ) -> None:
        """Refuse a memory that would take its owner past the cap.

        The refusal names only the caller's own count: another user's number
        of memories is theirs, not something a refusal may reveal."""
        count = uow.memories.count_in_cap_scope(kind, project_id, agent_id, user_id, tenant)
        if count < self.cap:
            return
        where = f"project {project_id}" if project_id else "no project"
        if kind == MemoryKind.PROJECT:
            owner = f"project {project_id} already holds {count} PROJECT memories"
            unit = "per project and agent"
            subject = f"project:{project_id} agent:{agent_id}"
        else:
            owner = f"user {user_id!r} already holds {count} USER memories in {where}"
            unit = "per user, project and agent"
            subject = f"user:{user_id} project:{project_id} agent:{agent_id}"
        raise FailedPrecondition(
            f"{owner} for agent {agent_id!r} outside the ARCHIVE tier; the limit is {self.cap}"
            f" {unit} (so every title can be read at selection). Delete some or move them to"
            " the ARCHIVE tier first.",
            # The cap is a quota a client can plan for; the subject is the
            # caller's own owner, as the message is.
            details=(
                QuotaViolation(
                    subject,
                    f"memories outside the ARCHIVE tier {unit}: at most {self.cap}; this owner"
                    f" has {count}",
                    quota_id="memories-per-owner",
                    quota_value=self.cap,
                ),
                ErrorInfo("MEMORY_CAP_REACHED", {"kind": MemoryKind(kind).name}),
            ),
        )

    async def get(self, memory_id: int, user_id: str, session_id: int = 0) -> Memory:
        v.positive_id("id", memory_id)
        v.identifier("user_id", user_id)
        v.positive_id("session_id", session_id, required=False)
        memory = await self.db.read(lambda c: c.memories.find(memory_id))
        return self._owned(memory, memory_id, user_id, session_id)

    @staticmethod
    def _owned(
        memory: Memory | None,
        memory_id: int,
        user_id: str,
        session_id: int | None,
        *,
        expired_ok: bool = False,
    ) -> Memory:
        """The memory, if this caller may address it by id; NOT_FOUND otherwise.

        An id is guessable, so a by-id call proves the same ownership a query
        filters on: the user for a USER memory, and the origin session for a
        TASK or SESSION tier memory. A refusal reads exactly like a missing
        row, so it does not confirm that someone else's memory exists.
        ``session_id=None`` skips the session check, for the usage log, whose
        rows are already confined to the (user, project) that recorded them.
        """
        if memory is None or (not expired_ok and memory.expired(time.time())):
            raise NotFound(
                f"memory {memory_id} does not exist",
                resource_type="memory",
                resource_name=memory_id,
            )
        tenant = tenancy.visible()
        if tenant is not None and memory.tenant != tenant:
            raise NotFound(
                f"memory {memory_id} does not exist",
                resource_type="memory",
                resource_name=memory_id,
            )
        if memory.kind == MemoryKind.USER and (not user_id or memory.user_id != user_id):
            raise NotFound(
                f"memory {memory_id} does not exist",
                resource_type="memory",
                resource_name=memory_id,
            )
        if (
            session_id is not None
            and int(memory.tier) in SESSION_TIERS
            and memory.session_id
            and memory.session_id != session_id
        ):
            raise NotFound(
                f"memory {memory_id} does not exist",
                resource_type="memory",
                resource_name=memory_id,
            )
        return memory

    async def list_visible(
        self, scope: MemoryScope, kind: int, page_size: int, page_token: str
    ) -> Page[Memory]:
        check_scope(scope)
        if kind not in (0, int(MemoryKind.PROJECT), int(MemoryKind.USER)):
            raise InvalidArgument(f"kind must be PROJECT, USER or unset, got {kind}", field="kind")
        size = paging.page_size(page_size)
        after = paging.decode_token(page_token)
        rows = await self.db.read(
            lambda c: c.memories.list_visible(scope, kind=kind, after_id=after, limit=size + 1)
        )
        return paging.page(rows, size)

    async def update(
        self,
        memory_id: int,
        values: Mapping[str, Any],
        mask: list[str],
        user_id: str,
        session_id: int = 0,
        by: ChangedBy = ANONYMOUS,
    ) -> Memory:
        v.positive_id("memory.id", memory_id)
        v.identifier("user_id", user_id)
        v.positive_id("session_id", session_id, required=False)
        paths = v.update_mask(mask, UPDATE_FIELDS)
        changes: dict[str, Any] = {}
        for p in paths:
            value = values.get(p)
            if p == "title":
                changes[p] = v.name(
                    "memory.title", value or "", limit=MAX_TITLE_CHARS, required=True
                )
            elif p == "content":
                changes[p] = v.text(
                    "memory.content", value or "", limit=v.MAX_MESSAGE_CHARS, required=True
                )
            elif p == "tier":
                changes[p] = _check_tier("memory.tier", int(value or 0), default=False)
            elif p == "confidence":
                changes[p] = _check_confidence("memory.confidence", float(value or 0.0))
            elif p == "metadata":
                changes[p] = v.metadata("memory.metadata", value or {})
            elif p == "expire_time":
                # Unset in the request clears it: the memory no longer expires.
                changes["expire_at"] = _expiry(value, None)

        def write(uow: UnitOfWork) -> Memory:
            current = self._owned(uow.memories.find(memory_id), memory_id, user_id, session_id)
            if current.tier == Tier.ARCHIVE and changes.get("tier", Tier.ARCHIVE) != Tier.ARCHIVE:
                # Leaving ARCHIVE brings it back into what selection reads.
                self._check_cap(
                    uow,
                    current.kind,
                    current.project_id,
                    current.agent_id,
                    current.user_id,
                    current.tenant,
                )
            changed = [
                "expire_time" if name == "expire_at" else name
                for name, value in changes.items()
                if getattr(current, name) != value
            ]
            if changed:
                uow.memories.record(current, REVISED, changed, by)
            updated = memory_upkeep.update(uow, memory_id, changes)
            memory_upkeep.schedule_expiry(uow, memory_id, changes.get("expire_at"))
            return updated

        memory = await self.db.write(write)
        self.signals.wake(jobs.INDEX_MEMORY, jobs.EXPIRE_MEMORY)
        return memory

    async def delete(
        self,
        memory_id: int,
        user_id: str,
        session_id: int = 0,
        by: ChangedBy = ANONYMOUS,
        *,
        erase_history: bool = False,
    ) -> None:
        """Delete a memory. Its history stays readable by its owner for the
        history retention, unless ``erase_history``: then every version goes
        now, and the text leaves the disk with the next scrub. Either way the
        formation events that named it keep no word of it."""
        v.positive_id("id", memory_id)
        v.identifier("user_id", user_id)
        v.positive_id("session_id", session_id, required=False)

        def write(uow: UnitOfWork) -> None:
            current = self._owned(uow.memories.find(memory_id), memory_id, user_id, session_id)
            if erase_history:
                erasing.forget_memories(uow, [memory_id])
            else:
                erasing.scrub_formation_events(uow, [memory_id])
                memory_upkeep.record_deletion(uow, current, by, self.history_retention)
                memory_upkeep.delete(uow, memory_id)
            erasing.scrub_soon(uow, self.scrub_delay)

        await self.db.write(write)
        self.signals.wake(jobs.INDEX_MEMORY)

    async def history(
        self, memory_id: int, user_id: str, session_id: int, page_size: int, page_token: str
    ) -> Page[Revision]:
        """A memory's earlier versions, oldest first, under GetMemory's ownership
        rule. A deleted memory's history is judged by the version deleted and
        stays readable until its retention ends; after that it reads as a
        memory that never existed, whether or not the purge job has run."""
        v.positive_id("memory_id", memory_id)
        v.identifier("user_id", user_id)
        v.positive_id("session_id", session_id, required=False)
        size = paging.page_size(page_size)
        after = paging.decode_token(page_token)

        def read(uow: UnitOfWork) -> list[Revision]:
            memory = uow.memories.find(memory_id)
            if memory is None:
                last = uow.memories.last(memory_id)
                if (
                    last is not None
                    and last.action in GONE
                    and last.purge_after is not None
                    and last.purge_after > time.time()
                ):
                    memory = last.previous
            # An expired memory the job has not removed yet is as good as
            # deleted: its owner may read its history.
            self._owned(memory, memory_id, user_id, session_id, expired_ok=True)
            return uow.memories.page(memory_id, after, size + 1)

        rows = await self.db.read_in_transaction(read)
        return paging.page(rows, size)

    # Usage log ----------------------------------------------------------------

    async def usage(
        self,
        thread_id: str | None,
        memory_id: int | None,
        user_id: str,
        project_id: int,
        page_size: int,
        page_token: str,
    ) -> Page[MemoryUsage]:
        """By memory, by thread, or (neither given) all of it, only what this
        (user, project) recorded: the usage log holds prompts, which must
        never reach another user."""
        size = paging.page_size(page_size)
        after = paging.decode_token(page_token)
        v.identifier("user_id", user_id)
        v.positive_id("project_id", project_id, required=False)
        owner = UsageOwner(user_id, project_id, tenancy.visible())
        if memory_id is not None:
            v.positive_id("memory_id", memory_id)

            def by_memory(uow: UnitOfWork) -> list[MemoryUsage]:
                self._owned(uow.memories.find(memory_id), memory_id, user_id, None)
                return uow.memories.usage_by_memory(memory_id, owner, after, size + 1)

            rows = await self.db.read_in_transaction(by_memory)
        elif thread_id is None:
            rows = await self.db.read(lambda c: c.memories.usage_by_owner(owner, after, size + 1))
        else:
            if not thread_id.strip():
                raise InvalidArgument(
                    "thread_id is required and must not be blank", field="thread_id"
                )
            v.identifier("thread_id", thread_id)
            rows = await self.db.read(
                lambda c: c.memories.usage_by_thread(thread_id, owner, after, size + 1)
            )
        return paging.page(rows, size)


def usage_owner(scope: MemoryScope) -> UsageOwner:
    """Who a selection's usage (and its thread) belongs to."""
    return UsageOwner(scope.user_id, scope.project_id, tenancy.visible())


def _check_replay(existing: Memory, row: Mapping[str, Any], request_id: str) -> None:
    """A request_id replays the first call only for that same call (AIP-155):
    the whole request is compared, so a retry that changed the content, tier
    or agent is refused instead of answered with what it did not ask to store."""
    stored = {
        "kind": existing.kind,
        "title": existing.title,
        "content": existing.content,
        "tier": existing.tier,
        "project_id": existing.project_id,
        "agent_id": existing.agent_id,
        "user_id": existing.user_id,
        "session_id": existing.session_id,
        "confidence": existing.confidence,
        "metadata": existing.metadata,
    }
    differs = [name for name, old in stored.items() if row[name] != old]
    if differs:
        raise AlreadyExists(
            f"request_id {v.quoted(request_id)} was already used for memory {existing.id},"
            f" with a different {', '.join(differs)}"
        )


def _checked_row(values: Mapping[str, Any], request_id: str) -> dict[str, Any]:
    """CreateMemory's fields, checked: the row to store."""
    kind = int(values.get("kind", 0))
    if kind not in (int(MemoryKind.PROJECT), int(MemoryKind.USER)):
        raise InvalidArgument(
            f"memory.kind must be PROJECT or USER, got {kind}", field="memory.kind"
        )
    title = v.name("memory.title", values.get("title", ""), limit=MAX_TITLE_CHARS, required=True)
    content = v.text(
        "memory.content", values.get("content", ""), limit=v.MAX_MESSAGE_CHARS, required=True
    )
    tier = _check_tier("memory.tier", int(values.get("tier", 0)), default=True)
    project_id = v.positive_id(
        "memory.project_id", int(values.get("project_id", 0)), required=False
    )
    session_id = v.positive_id(
        "memory.session_id", int(values.get("session_id", 0)), required=False
    )
    user_id = v.identifier("memory.user_id", values.get("user_id", ""))
    agent_id = v.identifier("memory.agent_id", values.get("agent_id", ""))
    confidence = float(values.get("confidence", 0.0)) or 1.0
    _check_confidence("memory.confidence", confidence)
    metadata = v.metadata("memory.metadata", values.get("metadata") or {})
    expire_at = _expiry(values.get("expire_time"), values.get("ttl"))
    v.identifier("request_id", request_id)
    if kind == MemoryKind.USER and not user_id:
        raise InvalidArgument(
            "memory.user_id is required for a USER memory", field="memory.user_id"
        )
    if kind == MemoryKind.PROJECT:
        if not project_id:
            raise InvalidArgument(
                "memory.project_id is required for a PROJECT memory",
                field="memory.project_id",
            )
        if user_id:
            raise InvalidArgument(
                "memory.user_id must be empty for a PROJECT memory (use kind USER)",
                field="memory.user_id",
            )
    row = {
        "kind": kind,
        "title": title,
        "content": content,
        "tier": tier,
        "project_id": project_id,
        "agent_id": agent_id,
        "user_id": user_id,
        "session_id": session_id,
        "confidence": confidence,
        "metadata": metadata,
        "expire_at": expire_at,
    }
    return row


def _owner_tenant(
    uow: UnitOfWork, project_id: int, session_id: int, visible: str | None, creator: str
) -> str:
    """Whose memory this is: the project's tenant, else the session's, else
    the caller's. Each must be one the caller sees."""
    tenant = creator
    if project_id:
        if not uow.projects.exists(project_id, visible):
            raise FailedPrecondition(f"memory.project_id {project_id} does not exist")
        tenant = uow.projects.tenant_of(project_id) or creator
    if session_id:
        try:
            session = uow.sessions.get(session_id, visible)
        except NotFound:
            raise FailedPrecondition(f"memory.session_id {session_id} does not exist") from None
        if project_id and session.tenant != tenant:
            raise FailedPrecondition(
                f"memory.session_id {session_id} and memory.project_id {project_id}"
                " belong to different tenants"
            )
        tenant = session.tenant
    return tenant


def _replayed(
    uow: UnitOfWork, row: Mapping[str, Any], tenant: str, request_id: str
) -> Memory | None:
    """The memory a retry of ``request_id`` asks for again, if there is one.
    A USER memory is refused while its user is being forgotten, and a request
    id an erasure took is refused rather than written again."""
    user_id = row["user_id"]
    if row["kind"] == MemoryKind.USER:
        erasing.refuse_while_forgetting(uow, tenant, user_id)
    if not request_id:
        return None
    # A retry key belongs to its owner (tenant and user): another user's key
    # is neither refused nor revealed.
    existing = uow.memories.find_by_request_id(tenant, user_id, request_id)
    if existing is not None:
        _check_replay(existing, row, request_id)
        return existing
    erasing.refuse_buried(
        uow, erasing.memory_request(uow, tenant, user_id, request_id, create=False), request_id
    )
    return None
