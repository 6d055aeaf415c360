"""The service's stored records: what the store reads and the domain and
servicers use, independent of SQL and protobuf (``store/`` fills them,
``api/`` translates them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Memory:
    id: int
    kind: int
    title: str
    content: str
    tier: int
    project_id: int = 0
    agent_id: str = ""
    user_id: str = ""
    session_id: int = 0
    confidence: float = 1.0
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    last_used_at: float | None = None
    use_count: int = 0
    request_id: str | None = None
    tenant: str = ""
    # Epoch seconds after which the memory is gone; None: never.
    expire_at: float | None = None
    # Where it came from: "client" (CreateMemory) or "formation", with the
    # episode it formed from (None once that episode is deleted).
    source: str = "client"
    source_episode_id: int | None = None

    def expired(self, at: float) -> bool:
        return self.expire_at is not None and self.expire_at <= at


@dataclass(frozen=True)
class MemoryUsage:
    id: int
    memory_id: int
    thread_id: str
    context: str
    relevance: float
    category: int
    used_at: float


@dataclass(frozen=True)
class UsageOwner:
    """The scope that selected: threads and their prompts belong to it."""

    user_id: str
    project_id: int
    #: The caller's tenant; None for a caller who sees every tenant.
    tenant: str | None = None


@dataclass(frozen=True)
class UsageRecord:
    memory_id: int
    relevance: float
    category: int


#: A memory revision's action: what replaced the version it keeps.
UPDATE = 1
DELETE = 2
EXPIRE = 3  # removed by the expire:memory job when its expire_time passed
GONE = (DELETE, EXPIRE)


@dataclass(frozen=True)
class ChangedBy:
    """Who made a change: the call's request id, and the API key's principal
    when auth is on (empty otherwise)."""

    request_id: str = ""
    principal: str = ""
    # What made it: the episode a memory formed from, and why (formation).
    episode_id: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class Revision:
    id: int
    memory_id: int
    action: int
    changed: list[str]
    previous: Memory
    request_id: str
    principal: str
    changed_at: float
    purge_after: float | None
    episode_id: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class Summary:
    id: int
    session_id: int
    project_id: int
    content: str
    first_episode_id: int = 0
    last_episode_id: int = 0
    episode_count: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def is_overview(self) -> bool:
        return not self.session_id


#: An extraction event's status.
EXTRACTION_DONE = 1
EXTRACTION_FAILED = 2


@dataclass(frozen=True)
class ExtractionEvent:
    id: int
    episode_id: int
    session_id: int
    project_id: int
    status: int
    error: str
    payload: dict[str, Any]
    created_at: float


@dataclass(frozen=True)
class EventFilter:
    episode_id: int = 0
    session_id: int = 0
    project_id: int = 0
    #: Only this tenant's events; None: every tenant's.
    tenant: str | None = None
    #: Only events written at or after this time (the retention; 0: all).
    since: float = 0.0


@dataclass(frozen=True)
class SelectionPick:
    memory_id: int
    relevance: float
    category: int
    previously_used: bool


@dataclass(frozen=True)
class SelectionAnswer:
    """A selection as it was answered."""

    picks: list[SelectionPick]
    method: str
    degraded_reason: str
    title_batches: int


@dataclass(frozen=True)
class SelectionKey:
    """Whose selection: the usage log's owner (tenant, user, project) and the
    client's request id."""

    tenant: str
    user_id: str
    project_id: int
    request_id: str

    def values(self) -> tuple[str, str, int, str]:
        return (self.tenant, self.user_id, self.project_id, self.request_id)
