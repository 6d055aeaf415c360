"""Erasures: a user forgotten or a project deleted, as durable work
(domain/erasure.py decides what goes and in what steps; store/erasure.py
keeps the receipts and removes the rows; docs/privacy.md)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

#: ForgetUser.
USER = 1
#: DeleteProject.
PROJECT = 2

RUNNING = 1
DONE = 2

# The steps, in order (``Erasure.phase``). An erasure of a user walks every
# one; a project's skips what only a user's needs (its graph goes whole).
PLANNED = "planned"
EPISODES = "episodes"
SESSIONS = "sessions"
MEMORIES = "memories"
GRAPH = "graph"
RECORDS = "records"
SUMMARIES = "summaries"
DISK = "disk"
FINISHED = "done"


@dataclass(frozen=True)
class Counts:
    """What an erasure removed, by kind: counts only, never content."""

    sessions: int = 0
    episodes: int = 0
    memories: int = 0
    memory_history: int = 0
    memory_usage: int = 0
    selections: int = 0
    formation_candidates: int = 0
    extraction_events: int = 0
    summaries_removed: int = 0
    summaries_rebuilt: int = 0
    entities: int = 0
    facts: int = 0
    evidence: int = 0
    aliases: int = 0
    mentions: int = 0
    merges: int = 0
    vectors: int = 0
    jobs_cancelled: int = 0
    llm_calls_unlinked: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    def plus(self, **more: int) -> Counts:
        return replace(self, **{k: getattr(self, k) + v for k, v in more.items()})

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Counts:
        known = {f.name for f in fields(cls)}
        return cls(**{k: int(v) for k, v in values.items() if k in known})


@dataclass(frozen=True)
class Erasure:
    id: int
    tenant: str
    kind: int
    state: int
    phase: str
    #: USER: the user, while the erasure runs ('' once it is done).
    user_id: str = ""
    #: USER: the project it is limited to (0: the tenant); PROJECT: the project.
    project_id: int = 0
    counts: Counts = field(default_factory=Counts)
    planned: Counts = field(default_factory=Counts)
    #: What one step hands the next (projects whose overviews drew on erased
    #: episodes, sessions to summarise again).
    carry: dict[str, Any] = field(default_factory=dict)
    principal: str = ""
    started_at: float = 0.0
    finished_at: float | None = None
    #: The request joined an erasure already running (not stored).
    joined: bool = False

    @property
    def done(self) -> bool:
        return self.state == DONE


@dataclass(frozen=True)
class Target:
    """Whom an erasure is for: a user of a tenant (in one project, or 0: the
    whole tenant), or a project."""

    tenant: str
    kind: int
    user_id: str = ""
    project_id: int = 0


@dataclass(frozen=True)
class Alias:
    id: int
    entity_id: int
    name: str


@dataclass
class EpisodeFallout:
    """What a set of episodes touched beyond their own rows."""

    #: (from entity, label) groups whose facts had evidence from them.
    groups: set[tuple[int, str]] = field(default_factory=set)
    #: Entities they were linked to, with how many of the episodes were.
    linked: dict[int, int] = field(default_factory=dict)
    #: Aliases first given by one of them.
    aliases: list[Alias] = field(default_factory=list)
    #: Their sessions: each one's project (0: outside any) and when the
    #: earliest of the episodes in it was written (a summary written before
    #: that cannot quote them).
    first_seen: dict[int, tuple[int, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class RemovalTargets:
    """The rows with a vector point that a removal takes, by kind: the domain
    queues their index jobs (domain/erasure.drop_points) before the store
    deletes them, since a job reads its target's tenant from the row."""

    episodes: tuple[int, ...] = ()
    summaries: tuple[int, ...] = ()
    entities: tuple[int, ...] = ()
    memories: tuple[int, ...] = ()
