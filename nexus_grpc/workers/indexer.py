"""Embeds rows and keeps the vector index in step with SQLite.

One handler serves every collection.  A job names only a row id: if the row
exists it is embedded and upserted under its own id (deterministic point
ids, so a retry overwrites rather than duplicates); if it is gone its point
is deleted.  Batches amortise the embedder, which is the costly step.
"""

from __future__ import annotations

import logging

from nexus_grpc.core.jobs import Job
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import embedding_state
from nexus_grpc.domain.vector_collections import EPISODES, CollectionSpec
from nexus_grpc.embedding import Embedder
from nexus_grpc.errors import DependencyError
from nexus_grpc.vectors import (
    CollectionNotFound,
    VectorIndex,
    VectorIndexUnavailable,
    VectorPoint,
)
from nexus_grpc.workers.dependency_failures import failure_for
from nexus_grpc.workers.worker import Outcome, Postpone, Retry

log = logging.getLogger(__name__)


class Indexer:
    def __init__(self, db: Database, embedder: Embedder, index: VectorIndex) -> None:
        self.db = db
        self.embedder = embedder
        self.index = index
        # The last failure talking to the index, for health detail.
        self.index_error: str | None = None

    async def ensure(self, spec: CollectionSpec) -> None:
        await self.index.ensure_collection(spec.name, self.embedder.dimension, spec.indexed_fields)

    async def apply(
        self, spec: CollectionSpec, docs: dict, present: list[int], gone: list[int]
    ) -> None:
        if present:
            vectors = await self.embedder.embed([docs[i][0] for i in present])
            await self.index.upsert(
                spec.name,
                [VectorPoint(i, vec, docs[i][1]) for i, vec in zip(present, vectors, strict=True)],
            )
        if gone:
            await self.index.delete(spec.name, gone)

    def handler(self, spec: CollectionSpec):
        async def handle(batch: list[Job]) -> list[Outcome]:
            return await self.run(spec, batch)

        return handle

    async def run(self, spec: CollectionSpec, batch: list[Job]) -> list[Outcome]:
        ids = list(dict.fromkeys(j.target_id for j in batch))
        docs = await self.db.read(lambda c: spec.load(c, ids))
        present = [i for i in ids if i in docs]
        gone = [i for i in ids if i not in docs]
        try:
            try:
                await self.apply(spec, docs, present, gone)
            except CollectionNotFound:
                # A Qdrant server that restarted empty, or one that was down
                # when we started: create the collection and go on.
                await self.ensure(spec)
                await self.apply(spec, docs, present, gone)
        except VectorIndexUnavailable as exc:
            self.index_error = str(exc)
            return [Outcome(j, error=Postpone(f"vector index unavailable: {exc}")) for j in batch]
        except DependencyError as exc:  # the embedder
            return [Outcome(j, error=failure_for(exc, "indexing failed")) for j in batch]
        except Exception as exc:
            log.exception("indexing %d %s failed", len(ids), spec.name)
            return [Outcome(j, error=Retry(f"indexing failed: {exc}")) for j in batch]
        self.index_error = None
        write = None
        if spec is EPISODES and present:

            def write(uow: UnitOfWork) -> None:
                embedding_state.embedded(uow, present)

        outcomes = [Outcome(j) for j in batch]
        outcomes[0].write = write
        return outcomes


def mark_episode_failed(uow: UnitOfWork, job: Job, error: str) -> None:
    embedding_state.failed(uow, job.target_id, error)


def note_episode_retry(uow: UnitOfWork, job: Job, error: str) -> None:
    embedding_state.retrying(uow, job.target_id, error)
