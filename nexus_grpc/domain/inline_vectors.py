"""A new row's vector in the row's own transaction (PostgreSQL with pgvector).

When the vectors live in the system of record's database (``--database-url``
and no ``--qdrant-url``), a create can store its row and the row's vector in
one transaction, so they commit together and cannot drift, and the row is
searchable by meaning the moment the call returns. The model is never called
inside the transaction (a database connection is not held across it): the
text is embedded first, then the write inserts the row and its vector.

When the embedder cannot answer in time (Ollama down, a stalled model), the
create is not held up and nothing is lost: the row is written as on every
other store, with its durable index job, and the index worker embeds it when
the embedder is back. After such a failure the inline path rests for a while
(``backoff``), so an outage costs each create nothing. Updates, deletes,
re-indexing and the rows the workers write (extraction, summaries) keep the
job path.

Concurrent creates share model runs: texts that arrive while the model is
busy go into the next batch (embedding/coalesce.py), as search queries do,
with as many batches at once as the model has threads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.core.vectors import VectorTableMissing
from nexus_grpc.embedding import Embedder
from nexus_grpc.embedding.coalesce import CoalescingLane

log = logging.getLogger(__name__)

EPISODES = "episodes"
MEMORIES = "memories"
ENTITIES = "entities"

#: How long a create waits for its vector before it takes the job path.
DEFAULT_TIMEOUT = 5.0
#: How long the inline path rests after the embedder failed.
DEFAULT_BACKOFF = 15.0
#: Texts in one model run (the index worker's batch).
MAX_BATCH = 32

T = TypeVar("T")
Vector = list[float]


async def write_with(
    db: Database, vector: Vector | None, fn: Callable[[UnitOfWork, Vector | None], T]
) -> T:
    """``fn(uow, vector)`` in a write; when the collection's table is not
    there (a vector index that could not be created at start), the same write
    again without the vector, which then queues the row's index job."""
    if vector is None:
        return await db.write(lambda c: fn(c, None))
    try:
        return await db.write(lambda c: fn(c, vector))
    except VectorTableMissing as exc:
        log.warning("%s; the new row goes through its index job", exc)
        return await db.write(lambda c: fn(c, None))


class InlineVectors:
    def __init__(
        self,
        embedder: Embedder,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        backoff: float = DEFAULT_BACKOFF,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self.embedder = embedder
        self.timeout = timeout
        self.backoff = backoff
        # As many batches at once as the model has threads for (the index
        # worker keeps two in flight for the same reason).
        lanes = int(getattr(embedder, "threads", 2) or 2)
        self._lane = CoalescingLane(self._run, max_batch=max_batch, lanes=lanes)
        self._resting_until = 0.0
        # For health detail and tests: the last failure, and how many creates
        # fell back to the job path.
        self.last_error: str | None = None
        self.fallbacks = 0

    async def _run(self, texts: list[str]) -> list[list[float]]:
        return await self.embedder.embed(texts)

    async def embed(self, text: str) -> list[float] | None:
        """The text's vector, or None: the caller then takes the job path."""
        if time.monotonic() < self._resting_until:
            self.fallbacks += 1
            return None
        try:
            # A create that stops waiting cancels only its own place in the
            # batch (the lane skips it); the others in it get their vectors.
            vector = await asyncio.wait_for(self._lane.embed(text), self.timeout)
        except Exception as exc:  # the job path embeds it; this create goes on
            self._resting_until = time.monotonic() + self.backoff
            self.last_error = f"{type(exc).__name__}: {exc}"
            self.fallbacks += 1
            log.warning(
                "embedding in the create failed (%s); new rows go through the index jobs"
                " for the next %.0f s",
                self.last_error,
                self.backoff,
            )
            return None
        if len(vector) != self.embedder.dimension:
            self.fallbacks += 1
            return None
        self.last_error = None
        return vector

    @staticmethod
    def put(
        uow: UnitOfWork,
        collection: str,
        row_id: int,
        vector: Sequence[float],
        payload: dict[str, Any],
    ) -> None:
        """In the create's transaction: the new row's point, beside it."""
        uow.vectors.put(collection, row_id, vector, payload)

    async def close(self) -> None:
        await self._lane.close()
