"""The knowledge graph's records, independent of protobuf and SQL."""

from __future__ import annotations

from dataclasses import dataclass, field

SOURCE_EXTRACTION = "extraction"
SOURCE_MANUAL = "manual"

# How a surface name came to be an entity's (EntityAlias.method).
METHOD_NEW = "new"  # the entity was created for it
METHOD_EXACT = "exact"  # its key is one of the entity's
METHOD_CONTAINMENT = "containment"  # part of the entity's name, or the reverse
METHOD_SHINGLE = "shingle"  # a near-duplicate spelling
METHOD_LLM = "llm"  # the LLM said so
METHOD_MERGE = "merge"  # moved with a merged entity
METHOD_MANUAL = "manual"  # UpsertEntity named it
METHODS = (
    METHOD_NEW,
    METHOD_EXACT,
    METHOD_CONTAINMENT,
    METHOD_SHINGLE,
    METHOD_LLM,
    METHOD_MERGE,
    METHOD_MANUAL,
)

RESOLVED = "resolved"
# Kept apart until the LLM says whether it is one of its candidates.
PENDING = "pending"

ASSERT = "assert"
END = "end"

MERGE_MANUAL = "manual"
MERGE_LLM = "llm"


@dataclass(frozen=True)
class Entity:
    id: int
    name: str
    type: str
    notes: str | None
    mention_count: int
    confidence: float
    source: str
    last_seen_at: float | None
    created_at: float
    project_id: int = 0
    # Set only for the graph of a session outside any project (project_id 0).
    session_id: int = 0
    # The tenant of the project or session whose graph this is.
    tenant: str = ""
    # Every surface name it was seen under, first seen first.
    aliases: tuple[str, ...] = ()
    resolution: str = RESOLVED


@dataclass(frozen=True)
class Relationship:
    id: int
    from_id: int
    to_id: int
    label: str
    notes: str | None
    mention_count: int
    created_at: float
    # [valid_at, invalid_at): when the fact held; invalid_at None while current.
    valid_at: float | None = None
    invalid_at: float | None = None
    # The episodes that said it began and that ended it (None: a manual
    # upsert, an ended fact's end that no episode said, or a deleted episode).
    asserted_by: int | None = None
    ended_by: int | None = None


@dataclass(frozen=True)
class Evidence:
    """One thing an episode (or a manual upsert: ``episode_id`` None) said
    about (from, label, to) at time ``at``: that it held, or that it ended."""

    id: int
    from_id: int
    to_id: int
    label: str
    kind: str  # ASSERT or END
    at: float
    episode_id: int | None = None
    mentions: int = 1
    notes: str | None = None
    created_at: float = 0.0


@dataclass
class Interval:
    """One span of time a (from, label, to) held, derived from its evidence."""

    to_id: int
    valid_at: float
    invalid_at: float | None = None
    asserted_by: int | None = None
    ended_by: int | None = None
    mentions: int = 0
    notes: str | None = None
    created_at: float = 0.0


@dataclass(frozen=True)
class EntityEpisode:
    """An episode that mentions an entity."""

    entity_id: int
    episode_id: int


@dataclass(frozen=True)
class EntityAlias:
    """A surface name of an entity, and how it was resolved to it."""

    id: int
    entity_id: int
    name: str
    norm: str
    method: str
    score: float
    episode_id: int | None
    created_at: float


@dataclass(frozen=True)
class MergedSource:
    """A merge's source as it was, and what moved from it to the target."""

    entity: Entity
    alias_names: tuple[str, ...] = ()
    # Episode links that moved (the target had none for these episodes).
    episode_ids: tuple[int, ...] = ()
    # Episode links both had: the target keeps them on undo.
    shared_episode_ids: tuple[int, ...] = ()
    evidence_from: tuple[int, ...] = ()
    evidence_to: tuple[int, ...] = ()


@dataclass(frozen=True)
class EntityMerge:
    id: int
    project_id: int
    session_id: int
    tenant: str
    target_id: int
    source_ids: tuple[int, ...]
    method: str
    reason: str
    created_at: float
    undone_at: float | None = None
    request_id: str | None = None
    principal: str = ""
    # The target's notes before the merge; the sources as they were.
    target_notes: str | None = None
    sources: tuple[MergedSource, ...] = field(default_factory=tuple)


#: An entity's graph: (project_id, session_id); a session outside any project
#: has its own (project_id 0).
Graph = tuple[int, int]


@dataclass(frozen=True)
class When:
    """Which intervals a read shows: the current ones (the default), those
    holding at ``as_of``, or every one (``history``)."""

    as_of: float | None = None
    history: bool = False


CURRENT = When()
HISTORY = When(history=True)


@dataclass(frozen=True)
class CandidateRow:
    """An entity as resolution sees it."""

    id: int
    name: str
    name_key: str
    type: str
    notes: str | None
    resolution: str
    keys: frozenset[str]
    distinct_from: frozenset[int]
