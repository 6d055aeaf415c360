"""Backend-neutral vector index interface, domain types and a tiny filter AST."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from nexus_grpc.errors import DependencyError

FieldValue = int | str | bool
FIELD_TYPES = ("integer", "keyword", "bool")


@dataclass(frozen=True)
class VectorPoint:
    id: int  # unsigned 64-bit (Qdrant point ids are u64 or UUID; we only use ints)
    vector: Sequence[float]
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class VectorHit:
    id: int
    score: float  # cosine similarity, higher is better
    payload: dict[str, Any]


@dataclass(frozen=True)
class MatchAny:
    """``key IN values``; use it for a single value too. Empty ``values`` matches nothing."""

    key: str
    values: tuple[FieldValue, ...]


@dataclass(frozen=True)
class Range:
    """``gte <= key <= lte`` on a numeric field; a None bound is open."""

    key: str
    gte: float | None = None
    lte: float | None = None


@dataclass(frozen=True)
class Filter:
    """must: all hold; should: at least one holds (if any given); must_not: none holds."""

    must: tuple[Cond, ...] = ()
    should: tuple[Cond, ...] = ()
    must_not: tuple[Cond, ...] = ()

    def is_empty(self) -> bool:
        return not (self.must or self.should or self.must_not)


Cond = MatchAny | Range | Filter  # nesting allowed: a Filter is itself a condition


#: A row as the vector index holds it: its text (embedded) and its payload
#: (what scope filters match on).
Document = tuple[str, dict[str, Any]]


class VectorIndexUnavailable(DependencyError):
    """The index cannot be reached right now (network, timeout, server down); retryable."""

    unreachable = True


class VectorIndexLocked(DependencyError, RuntimeError):
    """An embedded index directory is already opened by another process (or index object).
    Not retryable: two writers would corrupt it, so the second one must not start."""

    retryable = False


class CollectionNotFound(VectorIndexUnavailable, LookupError):
    """The named collection does not exist (call ensure_collection first).

    To a reader it is the index not being ready (a Qdrant server that came
    back empty), so it is a kind of unavailability; the indexer creates the
    collection and carries on."""


class VectorTableMissing(DependencyError):
    """The collection's table is not there (yet): the write must go through
    the index job instead. The transaction it was raised in is spoiled."""

    retryable = False


class DimensionMismatch(ValueError):
    """A collection exists with a different vector size than requested (drop and rebuild)."""


def split_values(values: Sequence[FieldValue]) -> tuple[list[int], list[str], list[bool]]:
    """Group MatchAny values by type: Qdrant's match-any takes only all-int or all-str lists,
    and bools need a separate exact match. bool is tested first since it subclasses int."""
    ints: list[int] = []
    strs: list[str] = []
    bools: list[bool] = []
    for v in values:
        if isinstance(v, bool):
            if v not in bools:
                bools.append(v)
        elif isinstance(v, int):
            ints.append(v)
        elif isinstance(v, str):
            strs.append(v)
        else:
            raise TypeError(f"unsupported filter value {v!r} ({type(v).__name__})")
    return ints, strs, bools


def check_field_types(indexed_fields: Mapping[str, str]) -> None:
    for key, kind in indexed_fields.items():
        if kind not in FIELD_TYPES:
            raise ValueError(
                f"field {key!r}: unknown index type {kind!r}, want one of {FIELD_TYPES}"
            )


@runtime_checkable
class VectorIndex(Protocol):
    async def ensure_collection(
        self, name: str, dimension: int, indexed_fields: Mapping[str, str]
    ) -> None:
        """Create the collection (cosine) and a payload index per field; idempotent.
        Raises DimensionMismatch if it exists with another dimension."""
        ...

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None: ...

    async def delete(self, collection: str, ids: Sequence[int]) -> None: ...

    async def search(
        self, collection: str, vector: Sequence[float], *, filter: Filter | None, limit: int
    ) -> list[VectorHit]: ...

    async def count(self, collection: str) -> int: ...

    def ids(self, collection: str) -> AsyncIterator[list[int]]:
        """Pages of all point ids (an async generator), for reconciliation with the DB."""
        ...

    async def retrieve_ids(self, collection: str, ids: Sequence[int]) -> set[int]: ...

    async def compact(self, collection: str, live: Callable[[], Awaitable[Collection[int]]]) -> int:
        """Leave no byte of a deleted point in the index's files: keep only the
        points whose ids ``live()`` returns (read once the index tracks the
        writes that race it); returns how many others were left out. An index
        whose deletes leave nothing behind of their own does nothing."""
        ...

    async def collection_dimension(self, collection: str) -> int | None: ...

    async def drop_collection(self, name: str) -> None: ...

    async def check(self) -> str | None: ...

    async def close(self) -> None: ...
