"""Embedded vector index on qdrant-edge (Qdrant's Rust engine, in-process).

Layout: one edge shard per collection in ``<directory>/<collection>/`` plus our own
``nexus_meta.json`` in it (the dimension, so it is known after a reopen without relying on
qdrant-edge's internal ``edge_config.json``).

Things measured on qdrant-edge-py 0.9.0 that shape this module:

* Every shard call (update, query, scroll, count, flush) holds the GIL for its whole
  duration; a thread does not let the event loop run meanwhile. So every call but a query
  on an open shard goes through one dedicated worker thread (which also serialises access
  to the shards) and writes are cut into chunks (a 20k-point upsert held the GIL ~0.4 s;
  256 points ≈4 ms) so the loop gets the GIL back between chunks. A query on an open shard
  runs on the caller's thread: it would hold the GIL, and so the loop, just as long on the
  worker, plus the hop.
* ``optimize()`` is never called: it holds the GIL for seconds to minutes. Filtered queries
  on payload-indexed fields stay fast without it.
* ``MatchValue(True)`` is silently converted to the integer 1 by the bindings and then
  matches nothing; passing ``numpy.bool_`` keeps it a bool. ``MatchAny`` takes only ints or
  only strings.
* Durability: points upserted without flush() survived ``kill -9`` (the WAL is replayed on
  load). We still flush() after every write call by default (≈7 ms for small shards) so that
  segments, not only the WAL, are on disk when a write returns.
* A shard directory is exclusively locked (its WAL); a second opener gets "WouldBlock".
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import qdrant_edge as qe

from nexus_grpc.core.vectors import (
    CollectionNotFound,
    DimensionMismatch,
    Filter,
    VectorHit,
    VectorIndexLocked,
    VectorPoint,
    check_field_types,
)
from nexus_grpc.runtime import deadlines

from .prewarm import PageCacheWarmer, shard_files
from .qdrant_filters import Conditions, translate

T = TypeVar("T")
log = logging.getLogger(__name__)

META_FILE = "nexus_meta.json"
#: Present while the shard's files may still hold a deleted point (compact).
DELETED_FILE = "nexus_deleted"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_SCHEMA = {
    "integer": qe.PayloadSchemaType.Integer,
    "keyword": qe.PayloadSchemaType.Keyword,
    "bool": qe.PayloadSchemaType.Bool,
}


def _bool_match(value: bool) -> qe.MatchValue:
    # np.bool_, not bool: see the module docstring.
    return qe.MatchValue(np.bool_(value))  # type: ignore[arg-type]


_CONDITIONS = Conditions(
    filter=lambda must, should, must_not: qe.Filter(must=must, should=should, must_not=must_not),
    range=lambda key, gte, lte: qe.FieldCondition(key, range=qe.RangeFloat(gte=gte, lte=lte)),
    any_of=lambda key, values: qe.FieldCondition(key, match=qe.MatchAny(values)),
    equals=lambda key, value: qe.FieldCondition(key, match=_bool_match(value)),
)


def to_edge_filter(f: Filter | None) -> qe.Filter | None:
    return translate(f, _CONDITIONS)


def _collection_config(dimension: int) -> qe.EdgeConfig:
    """Vectors and payloads stay in their memory-mapped files, not pinned in RAM.

    Searches are always filtered to a scope through the payload indexes, so a
    query reads a few pages of a few hundred vectors, not the whole file. The
    default preloads every vector: at 100,000 points that is ~300 MB resident
    per collection, for 0.05 ms a query instead of ~1 ms from the page cache.
    Loading an existing shard with this config converts it in place.

    One search thread: a scoped query scores a few hundred to a few thousand
    vectors, less work than handing it to a pool. With the default pool (sized
    from the CPUs) a query woke five threads that each spun before sleeping:
    0.6 ms of CPU a query across them, against 0.15 ms on the caller's thread
    alone, which holds the GIL for the query either way (bench/profile_findings.md).
    """
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(dimension, qe.Distance.Cosine, on_disk=True),
        on_disk_payload=True,
        max_search_threads=1,
    )


class EdgeVectorIndex:
    """VectorIndex over embedded qdrant-edge shards under ``directory``."""

    def __init__(
        self,
        directory: Path | str,
        *,
        flush_on_write: bool = True,
        write_chunk: int = 256,
        page_size: int = 1000,
        prewarm_bytes: int = 0,
    ) -> None:
        """``prewarm_bytes``: how much of the opened shards' files to read into the page
        cache in the background (see prewarm.py); 0 reads nothing."""
        self._dir = Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._flush_on_write = flush_on_write
        self._write_chunk = max(1, write_chunk)
        self._page_size = max(1, page_size)
        self._shards: dict[str, qe.EdgeShard] = {}
        self._dims: dict[str, int] = {}
        # Only this thread touches shards: serialises access and keeps the loop free.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qdrant-edge")
        # Its own thread: reading files releases the GIL and must not queue searches.
        self._warmer = PageCacheWarmer(prewarm_bytes)
        self._warm_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vector-warm")
        self._warm_futures: list[Future[None]] = []
        self._closed = False
        # Collections being compacted: the ids written or deleted meanwhile,
        # which the compaction copies again before it swaps (see compact).
        self._compacting: dict[str, set[int]] = {}

    # -- plumbing --------------------------------------------------------------------------

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise RuntimeError("EdgeVectorIndex is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _path(self, name: str) -> Path:
        if not _NAME_RE.match(name) or name in (".", ".."):
            raise ValueError(f"invalid collection name {name!r}")
        return self._dir / name

    def _exists(self, path: Path) -> bool:
        return (path / "edge_config.json").is_file()

    def _load(self, path: Path, config: qe.EdgeConfig | None = None) -> qe.EdgeShard:
        try:
            return qe.EdgeShard.load(str(path), config)
        except Exception as e:  # the bindings raise bare Exception with a message
            msg = str(e)
            if "WouldBlock" in msg or "lock" in msg.lower():
                raise VectorIndexLocked(
                    f"vector index {path} is in use by another process (or another index "
                    f"object in this one); only one nexus-grpc may use a data directory"
                ) from e
            if "incompatible" in msg:
                raise DimensionMismatch(f"collection {path.name}: {msg}") from e
            raise

    def _shard(self, name: str) -> qe.EdgeShard:
        shard = self._shards.get(name)
        if shard is None:
            path = self._path(name)
            _finish_swap(path)
            if not self._exists(path):
                raise CollectionNotFound(name)
            shard = self._shards[name] = self._load(path)
            self._schedule_warm(path)
        return shard

    def _schedule_warm(self, path: Path) -> None:
        if self._warmer.enabled and not self._closed:
            self._warm_futures.append(self._warm_executor.submit(self._warm, path))

    async def prewarm_finished(self) -> int:
        """Waits for the page-cache warm-ups scheduled so far; returns bytes read in all."""
        pending = [asyncio.wrap_future(f) for f in self._warm_futures]
        await asyncio.gather(*pending, return_exceptions=True)
        return self._warmer.read_bytes

    def _warm(self, path: Path) -> None:
        started = time.perf_counter()
        read = self._warmer.warm(shard_files(path))
        if read:
            log.info(
                "vector index: read %.0f MB of %r into the page cache in %.2fs",
                read / 1e6,
                path.name,
                time.perf_counter() - started,
            )

    def _read_dim(self, name: str) -> int | None:
        if name in self._dims:
            return self._dims[name]
        path = self._path(name)
        if not self._exists(path):
            return None
        try:
            dim = int(json.loads((path / META_FILE).read_text())["dimension"])
        except (OSError, ValueError, KeyError):
            # Meta missing (crash right after create): fall back to qdrant-edge's own config.
            cfg = json.loads((path / "edge_config.json").read_text())
            dim = int(cfg["vectors"][""]["size"])
        self._dims[name] = dim
        return dim

    def _write_meta(self, path: Path, dimension: int) -> None:
        tmp = path / (META_FILE + ".tmp")
        tmp.write_text(json.dumps({"dimension": dimension, "distance": "cosine"}))
        os.replace(tmp, path / META_FILE)

    def _flush(self, shard: qe.EdgeShard) -> None:
        if self._flush_on_write:
            shard.flush()

    # -- collections -----------------------------------------------------------------------

    async def ensure_collection(
        self, name: str, dimension: int, indexed_fields: Mapping[str, str]
    ) -> None:
        check_field_types(indexed_fields)
        await self._call(self._ensure, name, dimension, dict(indexed_fields))

    def _ensure(self, name: str, dimension: int, fields: dict[str, str]) -> None:
        path = self._path(name)
        _finish_swap(path)
        config = _collection_config(dimension)
        if self._exists(path):
            existing = self._read_dim(name)
            if existing != dimension:
                raise DimensionMismatch(
                    f"collection {name!r} has dimension {existing}, wanted {dimension}"
                )
            shard = self._shards.get(name)
            if shard is None:
                shard = self._shards[name] = self._load(path, config)  # also validates config
                self._schedule_warm(path)
        else:
            shard = self._shards[name] = qe.EdgeShard.create(str(path), config)
        if not (path / META_FILE).is_file():
            self._write_meta(path, dimension)
        self._dims[name] = dimension
        schema = shard.info().payload_schema
        for key, kind in fields.items():
            have = schema.get(key)
            if have is None or have.data_type != _SCHEMA[kind]:
                shard.update(qe.UpdateOperation.create_field_index(key, _SCHEMA[kind]))
        shard.flush()

    async def collection_dimension(self, collection: str) -> int | None:
        return await self._call(self._read_dim, collection)

    async def drop_collection(self, name: str) -> None:
        await self._call(self._drop, name)

    def _drop(self, name: str) -> None:
        path = self._path(name)
        shard = self._shards.pop(name, None)
        self._dims.pop(name, None)
        if shard is not None:
            shard.close()
        if path.exists():
            shutil.rmtree(path)

    # -- points ----------------------------------------------------------------------------

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        for start in range(0, len(points), self._write_chunk):
            await self._call(
                self._upsert_chunk, collection, points[start : start + self._write_chunk]
            )
        await self._call(lambda: self._flush(self._shard(collection)))

    def _upsert_chunk(self, collection: str, points: Sequence[VectorPoint]) -> None:
        shard = self._shard(collection)
        self._note_changed(collection, (int(p.id) for p in points))
        edge_points = [
            qe.Point(int(p.id), [float(x) for x in p.vector], dict(p.payload)) for p in points
        ]
        shard.update(qe.UpdateOperation.upsert_points(edge_points))

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        if not ids:
            return
        await self._call(self._delete, collection, [int(i) for i in ids])

    def _delete(self, collection: str, ids: list[Any]) -> None:
        shard = self._shard(collection)
        self._note_changed(collection, ids)
        marker = self._path(collection) / DELETED_FILE
        if not marker.exists():
            # Until a compaction rewrites the shard, its files keep the deleted points.
            marker.touch()
        for start in range(0, len(ids), 4096):
            shard.update(qe.UpdateOperation.delete_points(ids[start : start + 4096]))
        self._flush(shard)

    async def search(
        self, collection: str, vector: Sequence[float], *, filter: Filter | None, limit: int
    ) -> list[VectorHit]:
        if limit <= 0:
            return []
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest([float(x) for x in vector]),
            filter=to_edge_filter(filter),
            with_payload=True,
            with_vector=False,
        )
        # In-process and uninterruptible once started: refuse to start a search
        # whose caller has already given up, rather than hold the index thread.
        deadlines.budget(None, f"searching {collection!r}")
        shard = None if self._closed else self._shards.get(collection)
        if shard is not None:
            # A query holds the GIL from start to end (see above), so on the index
            # thread it stops the event loop just as long, and the hop there and
            # back cost the loop more than the query saved it (bench/profile_search.py:
            # the executor's wake-ups were 7 % of GIL time under semantic search).
            # Writes stay on the index thread; the GIL keeps the two apart.
            try:
                found = shard.query(request)
            except Exception:
                if self._shards.get(collection) is shard:
                    raise
                # A compaction swapped the shard between the lookup and the query.
                found = await self._call(lambda: self._shard(collection).query(request))
        else:
            found = await self._call(lambda: self._shard(collection).query(request))
        return [VectorHit(int(p.id), float(p.score), dict(p.payload or {})) for p in found]

    async def count(self, collection: str) -> int:
        return await self._call(lambda: self._shard(collection).count(qe.CountRequest(exact=True)))

    async def ids(self, collection: str) -> AsyncIterator[list[int]]:
        offset: Any = None
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=self._page_size, with_payload=False, with_vector=False
            )
            records, offset = await self._call(lambda r=request: self._shard(collection).scroll(r))
            if records:
                yield [int(r.id) for r in records]
            if offset is None:
                return

    async def retrieve_ids(self, collection: str, ids: Sequence[int]) -> set[int]:
        if not ids:
            return set()
        wanted: list[Any] = [int(i) for i in ids]
        found = await self._call(lambda: self._shard(collection).retrieve(wanted, False, False))
        return {int(r.id) for r in found}

    # -- compaction ------------------------------------------------------------------------

    async def compact(self, collection: str, live: Callable[[], Awaitable[Collection[int]]]) -> int:
        """Rewrite the collection with only the points whose ids ``live()``
        returns (the rows that exist), so that no file of it holds a deleted
        point's vector or payload: qdrant-edge marks a deleted point and keeps
        its bytes in its segments and its WAL until they are rebuilt.

        ``live`` is read once the writes to the collection are being tracked:
        a point written after that is copied again at the swap, one written
        before belongs to a row ``live`` finds.

        The live points are copied page by page into a new shard beside the
        old one (each page a call of its own on the index thread, so searches
        and writes go on between them); points written or deleted meanwhile
        are copied again at the end, in the one call that swaps the shards.
        Returns how many points were left out. A crash leaves either the old
        shard or the new one whole (``_finish_swap``)."""
        if self._read_dim(collection) is None:
            return 0
        if not (self._path(collection) / DELETED_FILE).exists():
            return 0  # nothing deleted since the last compaction
        self._compacting[collection] = set()
        dropped = 0
        try:
            kept = {int(i) for i in await live()}
            new = await self._call(self._begin_compaction, collection)
            offset: Any = None
            while True:
                offset, left_out = await self._call(self._copy_page, collection, new, offset, kept)
                dropped += left_out
                if offset is None:
                    break
            await self._call(self._swap, collection, new)
        finally:
            self._compacting.pop(collection, None)
            await self._call(_remove_tree, self._path(collection).with_name(collection + _NEW))
        return dropped

    def _note_changed(self, collection: str, ids: Iterable[Any]) -> None:
        changed = self._compacting.get(collection)
        if changed is not None:
            changed.update(int(i) for i in ids)

    def _begin_compaction(self, collection: str) -> qe.EdgeShard:
        path = self._path(collection)
        target = path.with_name(collection + _NEW)
        _remove_tree(target)
        old = self._shard(collection)
        dimension = self._read_dim(collection)
        assert dimension is not None
        new = qe.EdgeShard.create(str(target), _collection_config(dimension))
        for key, schema in old.info().payload_schema.items():
            new.update(qe.UpdateOperation.create_field_index(key, schema.data_type))
        return new

    def _copy_page(
        self, collection: str, new: qe.EdgeShard, offset: Any, kept: set[int]
    ) -> tuple[Any, int]:
        # A page as small as a write chunk: each holds the GIL (and so the
        # event loop) while it is read and written.
        request = qe.ScrollRequest(
            offset=offset, limit=self._write_chunk, with_payload=True, with_vector=True
        )
        records, after = self._shard(collection).scroll(request)
        live = [r for r in records if int(r.id) in kept]
        if live:
            new.update(qe.UpdateOperation.upsert_points([_as_point(r) for r in live]))
        return after, len(records) - len(live)

    def _swap(self, collection: str, new: qe.EdgeShard) -> None:
        path = self._path(collection)
        old = self._shard(collection)
        changed = sorted(self._compacting.get(collection, ()))
        if changed:
            present = {int(r.id): r for r in old.retrieve(list(changed), True, True)}
            upserts = [_as_point(present[i]) for i in changed if i in present]
            gone: list[Any] = [i for i in changed if i not in present]
            if upserts:
                new.update(qe.UpdateOperation.upsert_points(upserts))
            if gone:
                new.update(qe.UpdateOperation.delete_points(gone))
        new.flush()
        new.close()
        # Out of the map before it closes: a search that took it from there
        # and finds it closed sees that it was swapped and asks again.
        del self._shards[collection]
        old.flush()
        old.close()
        shutil.copy2(path / META_FILE, path.with_name(collection + _NEW) / META_FILE)
        retired = path.with_name(collection + _OLD)
        _remove_tree(retired)
        os.replace(path, retired)
        os.replace(path.with_name(collection + _NEW), path)
        _remove_tree(retired)
        self._shards[collection] = self._load(path)

    # -- lifecycle -------------------------------------------------------------------------

    async def check(self) -> str | None:
        # Deliberately not routed through the worker: a health probe must not queue behind
        # a long write batch.
        if self._closed:
            return "vector index is closed"
        if not self._dir.is_dir():
            return f"vector index directory {self._dir} is missing"
        if not os.access(self._dir, os.W_OK):
            return f"vector index directory {self._dir} is not writable"
        return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True  # refuse new calls; already-queued ones still run first
        self._warmer.stop()
        self._warm_executor.shutdown(wait=False, cancel_futures=True)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._close_all)
        finally:
            self._executor.shutdown(wait=False)

    def _close_all(self) -> None:
        shards, self._shards = self._shards, {}
        for shard in shards.values():
            try:
                shard.flush()
            finally:
                shard.close()


# A compaction builds ``<collection>.compacting`` beside the collection, moves
# the collection to ``<collection>.retired`` and the new one into its place,
# then removes the retired one.
_NEW = ".compacting"
_OLD = ".retired"


def _finish_swap(path: Path) -> None:
    """After a crash in a compaction: the swap completed if the collection is
    missing and the new copy is whole (it was moved aside), else it never
    began; either way what is left over goes."""
    new, old = path.with_name(path.name + _NEW), path.with_name(path.name + _OLD)
    if not path.exists() and old.exists():
        if (new / META_FILE).is_file():
            os.replace(new, path)
        else:
            os.replace(old, path)
    _remove_tree(new)
    _remove_tree(old)


def _remove_tree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)


def _as_point(record: Any) -> qe.Point:
    vector = record.vector
    if isinstance(vector, dict):
        vector = vector.get("", next(iter(vector.values())))
    return qe.Point(int(record.id), list(vector), dict(record.payload or {}))
