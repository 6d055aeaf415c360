"""The vector collections: their job kind, payload indexes and loader."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nexus_grpc.core import jobs
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.vectors import Document

#: A collection's documents, by id, read in a transaction (those missing are gone).
Loader = Callable[[UnitOfWork, Sequence[int]], dict[int, Document]]


@dataclass(frozen=True)
class CollectionSpec:
    name: str
    job_kind: str
    table: str
    # Every payload field a scope filter matches on gets a payload index.
    indexed_fields: dict[str, str]
    load: Loader


EPISODES = CollectionSpec(
    "episodes",
    jobs.INDEX_EPISODE,
    "episodes",
    {"sessionId": "integer", "occurAt": "integer"},
    lambda uow, ids: uow.documents.episodes(ids),
)
ENTITIES = CollectionSpec(
    "entities",
    jobs.INDEX_ENTITY,
    "entities",
    {"projectId": "integer", "sessionId": "integer"},
    lambda uow, ids: uow.documents.entities(ids),
)
SUMMARIES = CollectionSpec(
    "summaries",
    jobs.INDEX_SUMMARY,
    "summaries",
    {"sessionId": "integer", "projectId": "integer"},
    lambda uow, ids: uow.documents.summaries(ids),
)
MEMORIES = CollectionSpec(
    "memories",
    jobs.INDEX_MEMORY,
    "memories",
    {
        "kind": "integer",
        "tier": "integer",
        "projectId": "integer",
        "userId": "keyword",
        "sessionId": "integer",
        "agentId": "keyword",
        "tenant": "keyword",
    },
    lambda uow, ids: uow.documents.memories(ids),
)
ALL = (EPISODES, ENTITIES, SUMMARIES, MEMORIES)
