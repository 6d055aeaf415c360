"""The vector collections: their job kind, payload indexes and loader."""

from __future__ import annotations

from dataclasses import dataclass

from nexus_grpc.core import jobs
from nexus_grpc.store import documents
from nexus_grpc.store.documents import Loader


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
    documents.episodes,
)
ENTITIES = CollectionSpec(
    "entities",
    jobs.INDEX_ENTITY,
    "entities",
    {"projectId": "integer", "sessionId": "integer"},
    documents.entities,
)
SUMMARIES = CollectionSpec(
    "summaries",
    jobs.INDEX_SUMMARY,
    "summaries",
    {"sessionId": "integer", "projectId": "integer"},
    documents.summaries,
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
    },
    documents.memories,
)
ALL = (EPISODES, ENTITIES, SUMMARIES, MEMORIES)
