"""The service's own types, independent of protobuf and SQL."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def episode_text(user_message: str, ai_response: str) -> str:
    """An exchange as one text (the service's one format): what is embedded and
    what summaries read."""
    return f"User: {user_message}\nAssistant: {ai_response}"


class JobState(IntEnum):
    PENDING = 1
    DONE = 2
    FAILED = 3


class SearchMode(IntEnum):
    KEYWORD = 1
    SEMANTIC = 2
    HYBRID = 3


class SearchSource(IntEnum):
    KEYWORD = 1
    SEMANTIC = 2


class MemoryKind(IntEnum):
    PROJECT = 1
    USER = 2


class Tier(IntEnum):
    TASK = 1
    SESSION = 2
    LONGTERM = 3
    ARCHIVE = 4


class MemoryCategory(IntEnum):
    NECESSARY = 1
    SUPPORTING = 2


@dataclass(frozen=True)
class Project:
    id: int
    name: str
    description: str = ""
    colour: str = ""
    icon: str = ""
    notes: str = ""
    system_prompt: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    tenant: str = ""
    #: Seconds its sessions and episodes are kept; None: for ever.
    retention: float | None = None
    #: Relationship labels that hold one value at a time in its graph; None:
    #: the defaults (domain/facts.py).
    single_valued_labels: tuple[str, ...] | None = None
    #: Which memories its conversations form (MemoryFormation); None: the default.
    memory_formation: int | None = None


class MemoryFormation(IntEnum):
    """What a project's conversations form by themselves (the wire enum's values)."""

    OFF = 1
    USER = 2
    USER_AND_PROJECT = 3


# A project that never chose: USER memories form, but only from a session that
# names its user, which a client does on purpose; PROJECT memories are shared
# by every agent of the project and so wait for the project to ask.
DEFAULT_MEMORY_FORMATION = MemoryFormation.USER


@dataclass(frozen=True)
class Session:
    id: int
    external_id: str
    name: str = ""
    project_id: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    tenant: str = ""
    #: Who the conversation is with (USER memories form for them), and the
    #: agent: both immutable, "" when not given.
    user_id: str = ""
    agent_id: str = ""


@dataclass(frozen=True)
class Episode:
    id: int
    session_id: int
    user_message: str
    ai_response: str
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    # When the exchange happened: created_at unless stored with an occur_time.
    occur_at: float = 0.0
    embed_state: JobState = JobState.PENDING
    embed_error: str = ""
    extract_state: JobState = JobState.PENDING
    extract_error: str = ""
    #: Memory formation's state; None where formation does not apply.
    memory_state: JobState | None = None
    memory_error: str = ""
    #: The user the key that wrote it could act for: its session's user_id,
    #: checked when it was written. Memory formation forms USER memories
    #: only for this user (docs/security.md).
    acts_for: str = ""

    @property
    def text(self) -> str:
        """The text that is embedded, in the service's one format."""
        return episode_text(self.user_message, self.ai_response)


@dataclass(frozen=True)
class TimeWindow:
    """[start, end) in epoch seconds; None leaves that side open."""

    start: float | None = None
    end: float | None = None

    @property
    def empty(self) -> bool:
        """True when the window bounds nothing (both sides open)."""
        return self.start is None and self.end is None

    def holds(self, t: float) -> bool:
        return (self.start is None or t >= self.start) and (self.end is None or t < self.end)


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_token: str


#: The tiers seen only in their origin session (see domain.memory_visibility).
SESSION_TIERS = (int(Tier.TASK), int(Tier.SESSION))


@dataclass(frozen=True)
class MemoryScope:
    project_id: int = 0
    user_id: str = ""
    session_id: int = 0
    agent_id: str = ""
    include_archived: bool = False

    def shared_tiers(self) -> tuple[int, ...]:
        if self.include_archived:
            return (int(Tier.LONGTERM), int(Tier.ARCHIVE))
        return (int(Tier.LONGTERM),)


@dataclass(frozen=True)
class NewEpisode:
    """One row for ``insert_many``: a checked episode of an existing session."""

    session_id: int
    user_message: str
    ai_response: str
    metadata: Mapping[str, Any]
    request_id: str | None
    occur_at: float | None = None
    # A restored episode's original create time; None: now.
    created_at: float | None = None
    # The user its writer acted for (``insert``'s ``acts_for``).
    acts_for: str = ""


@dataclass(frozen=True)
class Backlog:
    """Episodes of some sessions, and how many of them still wait for each
    background job (embed_state, extract_state, memory_state pending)."""

    episodes: int
    not_indexed: int
    not_extracted: int
    not_formed: int


@dataclass(frozen=True)
class SummaryProgress:
    """What a session's summary rule reads: a summary job already queued, the
    episodes since the last summary and the characters of its first turns
    (each counted no further than the rule needs)."""

    queued: bool
    new_episodes: int
    chars: int
