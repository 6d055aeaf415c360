"""``nexus-grpc reindex``: rebuild the whole vector index from SQLite.

Run with the server stopped (the embedded engine takes an exclusive lock).
Drops every collection, re-embeds every row with the configured embedder,
and records that embedder as the one the data is indexed with.
"""

from __future__ import annotations

import functools
import time
from typing import TextIO

from nexus_grpc.app import EMBEDDING_META_KEY, embedding_signature, make_database, make_index
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.vectors import Document
from nexus_grpc.domain import vector_collections
from nexus_grpc.embedding import make_embedder
from nexus_grpc.runtime.config import Settings
from nexus_grpc.store.sql import now
from nexus_grpc.workers.indexer import Indexer

BATCH = 64


def _progress(out: TextIO, name: str, done: int, total: int, started: float) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    rate = done / max(time.monotonic() - started, 1e-6)
    out.write(f"\r{name:<10} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {rate:,.0f}/s")
    out.flush()


async def reindex(settings: Settings, progress: TextIO) -> None:
    # The system of record the server uses: SQLite, or PostgreSQL (--database-url).
    db = make_database(settings)
    await db.open()
    embedder = make_embedder(
        settings.embedder,
        ollama_host=settings.ollama_url or None,
        ollama_model=settings.embedding_model,
        threads=settings.embedder_threads,
    )
    index = make_index(settings)
    indexer = Indexer(db, embedder, index)
    # Rows and jobs created after this moment (should a server be running
    # against a remote index) keep their own index jobs.
    began = now()
    try:
        for spec in vector_collections.ALL:
            await index.drop_collection(spec.name)
            await indexer.ensure(spec)
            ids = sorted(await db.read(functools.partial(_ids, table=spec.table)))
            started = time.monotonic()
            for start in range(0, len(ids), BATCH):
                chunk = ids[start : start + BATCH]
                docs = await db.read(functools.partial(_load, spec=spec, ids=chunk))
                await indexer.apply(spec, docs, [i for i in chunk if i in docs], [])
                _progress(progress, spec.name, start + len(chunk), len(ids), started)
            _progress(progress, spec.name, len(ids), len(ids), started)
            progress.write("\n")

        signature = embedding_signature(embedder)

        def record(uow: UnitOfWork) -> None:
            uow.meta.put(EMBEDDING_META_KEY, signature)
            uow.episodes.mark_indexed_before(began)
            for spec in vector_collections.ALL:
                uow.jobs.delete_created_before(spec.job_kind, began)

        await db.write(record)
        progress.write(f"reindexed with {signature}\n")
    finally:
        await index.close()
        await embedder.close()
        await db.close()


def _ids(uow: UnitOfWork, table: str) -> set[int]:
    return uow.documents.all_ids(table)


def _load(
    uow: UnitOfWork, spec: vector_collections.CollectionSpec, ids: list[int]
) -> dict[int, Document]:
    return spec.load(uow, ids)
