"""Vectors beside the rows, in PostgreSQL with pgvector.

With ``--database-url`` and no ``--qdrant-url``, each collection is a table
in the same database (``vectors_<name>``: id, embedding, payload) with an
HNSW index for cosine distance. The embedded qdrant-edge index cannot serve
there: it is a directory that belongs to one process, and several instances
share the database.

Like Qdrant, this is a derived index, never the system of record;
``nexus-grpc reindex`` rebuilds it. Being in the same database, a new row's
vector is written in the row's own transaction (store/postgres/vectors.py, from
domain/inline_vectors.py), so the two cannot drift; the jobs outbox feeds it
everything else (updates, deletes, the rows the workers write, and creates
whose embedding could not be had in time). Scope filters are the
same filter AST as Qdrant's, turned into SQL over the JSONB payload; HNSW's
iterative scan (pgvector 0.8) keeps a narrow filter from starving the top-k.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from nexus_grpc.core.vectors import (
    CollectionNotFound,
    DimensionMismatch,
    Filter,
    MatchAny,
    Range,
    VectorHit,
    VectorIndexUnavailable,
    VectorPoint,
    check_field_types,
    split_values,
)

T = TypeVar("T")
_NAME = re.compile(r"[a-z][a-z0-9_]{0,40}")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,60}")


def _table(collection: str) -> str:
    if not _NAME.fullmatch(collection):
        raise ValueError(f"bad collection name {collection!r}")
    return f"vectors_{collection}"


def _key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise ValueError(f"bad payload key {key!r}")
    return key


def _vector(values: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in values) + "]"


def to_sql(f: Filter | None) -> tuple[str, list[Any]]:
    """The filter as a WHERE fragment over ``payload`` and its parameters."""
    if f is None or f.is_empty():
        return "true", []
    return _filter(f)


def _filter(f: Filter) -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    for cond in f.must:
        sql, p = _cond(cond)
        parts.append(sql)
        params += p
    if f.should:
        alternatives = []
        for cond in f.should:
            sql, p = _cond(cond)
            alternatives.append(sql)
            params += p
        parts.append("(" + " OR ".join(alternatives) + ")")
    for cond in f.must_not:
        sql, p = _cond(cond)
        parts.append(f"NOT COALESCE({sql}, false)")
        params += p
    return "(" + (" AND ".join(parts) or "true") + ")", params


def _cond(c: MatchAny | Range | Filter) -> tuple[str, list[Any]]:
    if isinstance(c, Filter):
        return _filter(c)
    key = _key(c.key)
    if isinstance(c, Range):
        parts: list[str] = []
        bounds: list[Any] = []
        if c.gte is not None:
            parts.append(f"(payload->>'{key}')::double precision >= %s")
            bounds.append(c.gte)
        if c.lte is not None:
            parts.append(f"(payload->>'{key}')::double precision <= %s")
            bounds.append(c.lte)
        return "(" + (" AND ".join(parts) or "payload ? %s") + ")", bounds or [key]
    ints, strs, bools = split_values(c.values)
    options: list[str] = []
    params: list[Any] = []
    if ints:
        options.append(
            f"(jsonb_typeof(payload->'{key}') = 'number'"
            f" AND (payload->>'{key}')::numeric = ANY(%s::numeric[]))"
        )
        params.append(ints)
    if strs:
        options.append(
            f"(jsonb_typeof(payload->'{key}') = 'string' AND payload->>'{key}' = ANY(%s))"
        )
        params.append(strs)
    if bools:
        options.append(
            f"(jsonb_typeof(payload->'{key}') = 'boolean'"
            f" AND (payload->>'{key}')::boolean = ANY(%s))"
        )
        params.append(bools)
    if not options:
        return "false", []
    return "(" + " OR ".join(options) + ")", params


class PgVectorIndex:
    """The VectorIndex protocol over pgvector tables in the system of record's database."""

    def __init__(self, url: str, *, connections: int = 4) -> None:
        self.url = url
        self._connections = max(1, connections)
        self._executor = ThreadPoolExecutor(
            max_workers=self._connections, thread_name_prefix="pgvector"
        )
        self._local: dict[int, Any] = {}
        self._closed = False

    # -- plumbing --------------------------------------------------------------------------

    def _conn(self) -> Any:
        """This thread's connection (each pool thread keeps its own)."""
        import threading

        import psycopg

        ident = threading.get_ident()
        conn = self._local.get(ident)
        if conn is None or conn.closed or conn.broken:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            # Keep filtered searches exact in count: walk on until `limit` rows pass.
            conn.execute("SET hnsw.iterative_scan = relaxed_order")
            self._local[ident] = conn
        return conn

    async def _call(self, fn: Callable[[Any], T]) -> T:
        if self._closed:
            raise VectorIndexUnavailable("vector index is closed")
        import psycopg

        ctx = contextvars.copy_context()

        def run() -> T:
            return ctx.run(fn, self._conn())

        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, run)
        except psycopg.errors.UndefinedTable as exc:
            raise CollectionNotFound(str(exc).splitlines()[0]) from exc
        except psycopg.OperationalError as exc:
            raise VectorIndexUnavailable(f"PostgreSQL: {exc}") from exc

    # -- collections -----------------------------------------------------------------------

    async def ensure_collection(
        self, name: str, dimension: int, indexed_fields: Mapping[str, str]
    ) -> None:
        check_field_types(indexed_fields)
        table = _table(name)

        def ensure(conn: Any) -> None:
            existing = _dimension(conn, table)
            if existing is not None:
                if existing != dimension:
                    raise DimensionMismatch(
                        f"collection {name!r} holds {existing}-dimensional vectors, not {dimension}"
                    )
                return
            with conn.transaction():
                # Instances starting together: one creates, the others wait and find it.
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
                if _dimension(conn, table) is not None:
                    return
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(
                    f"CREATE TABLE {table} (id BIGINT PRIMARY KEY,"
                    f" embedding vector({int(dimension)}) NOT NULL,"
                    " payload JSONB NOT NULL DEFAULT '{}')"
                )
                conn.execute(
                    f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (embedding vector_cosine_ops)"
                )
                for key in indexed_fields:
                    conn.execute(
                        f"CREATE INDEX {table}_{_key(key).lower()} ON {table}"
                        f" ((payload->>'{_key(key)}'))"
                    )

        await self._call(ensure)

    async def collection_dimension(self, collection: str) -> int | None:
        table = _table(collection)
        return await self._call(lambda conn: _dimension(conn, table))

    async def drop_collection(self, name: str) -> None:
        table = _table(name)
        await self._call(lambda conn: conn.execute(f"DROP TABLE IF EXISTS {table}"))

    # -- points ----------------------------------------------------------------------------

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        table = _table(collection)
        rows = [(int(p.id), _vector(p.vector), json.dumps(dict(p.payload))) for p in points]

        def upsert(conn: Any) -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {table} (id, embedding, payload) VALUES (%s, %s::vector, %s)"
                    " ON CONFLICT (id) DO UPDATE SET embedding = excluded.embedding,"
                    " payload = excluded.payload",
                    rows,
                )

        await self._call(upsert)

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        if not ids:
            return
        table = _table(collection)
        wanted = [int(i) for i in ids]
        await self._call(
            lambda conn: conn.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", (wanted,))
        )

    async def search(
        self, collection: str, vector: Sequence[float], *, filter: Filter | None, limit: int
    ) -> list[VectorHit]:
        if limit <= 0:
            return []
        table = _table(collection)
        where, params = to_sql(filter)
        query = _vector(vector)

        def search(conn: Any) -> list[VectorHit]:
            rows = conn.execute(
                f"SELECT id, 1 - (embedding <=> %s::vector), payload FROM {table}"
                f" WHERE {where} ORDER BY embedding <=> %s::vector LIMIT %s",
                (query, *params, query, limit),
            ).fetchall()
            return [VectorHit(int(r[0]), float(r[1]), dict(r[2])) for r in rows]

        return await self._call(search)

    async def count(self, collection: str) -> int:
        table = _table(collection)
        row = await self._call(
            lambda conn: conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        )
        return int(row[0])

    async def ids(self, collection: str) -> AsyncIterator[list[int]]:
        table = _table(collection)
        after = -1

        def page_after(conn: Any, after: int) -> list[int]:
            rows = conn.execute(
                f"SELECT id FROM {table} WHERE id > %s ORDER BY id LIMIT 1000", (after,)
            ).fetchall()
            return [int(r[0]) for r in rows]

        while True:
            page = await self._call(functools.partial(page_after, after=after))
            if not page:
                return
            yield page
            after = page[-1]

    async def compact(self, collection: str, live: Callable[[], Awaitable[Collection[int]]]) -> int:
        """Nothing here: pgvector's points are rows, deleted with their rows;
        the database's vacuum (Database.scrub) reclaims them."""
        return 0

    async def retrieve_ids(self, collection: str, ids: Sequence[int]) -> set[int]:
        if not ids:
            return set()
        table = _table(collection)
        wanted = [int(i) for i in ids]
        rows = await self._call(
            lambda conn: conn.execute(
                f"SELECT id FROM {table} WHERE id = ANY(%s)", (wanted,)
            ).fetchall()
        )
        return {int(r[0]) for r in rows}

    # -- lifecycle -------------------------------------------------------------------------

    async def check(self) -> str | None:
        try:
            await self._call(lambda conn: conn.execute("SELECT 1").fetchone())
        except VectorIndexUnavailable as exc:
            return str(exc)
        return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True

        def close_all() -> None:
            for conn in list(self._local.values()):
                conn.close()
            self._local.clear()

        await asyncio.get_running_loop().run_in_executor(None, close_all)
        self._executor.shutdown(wait=True)


def _dimension(conn: Any, table: str) -> int | None:
    row = conn.execute(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s)"
        " AND attname = 'embedding' AND NOT attisdropped",
        (table,),
    ).fetchone()
    return None if row is None else int(row[0])
