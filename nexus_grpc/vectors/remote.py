"""Vector index on a Qdrant server/cluster (or qdrant-client's in-process local mode)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from typing import Any

import httpx
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from nexus_grpc.core.redact import mask_url
from nexus_grpc.core.vectors import (
    CollectionNotFound,
    DimensionMismatch,
    Filter,
    VectorHit,
    VectorIndexUnavailable,
    VectorPoint,
    check_field_types,
)
from nexus_grpc.errors import DeadlineExceeded
from nexus_grpc.runtime import deadlines
from nexus_grpc.vectors.qdrant_filters import Conditions, translate

# Transport-level failures: qdrant-client wraps httpx errors in ResponseHandlingException,
# but raw httpx/OS errors and (with prefer_grpc) grpc errors can surface too.
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    ResponseHandlingException,
    httpx.TransportError,
    ConnectionError,
    TimeoutError,
)
try:
    import grpc

    _TRANSPORT_ERRORS += (grpc.RpcError,)
except ImportError:  # pragma: no cover
    pass

_SCHEMA = {
    "integer": models.PayloadSchemaType.INTEGER,
    "keyword": models.PayloadSchemaType.KEYWORD,
    "bool": models.PayloadSchemaType.BOOL,
}
_TRANSIENT_HTTP = {408, 429, 500, 502, 503, 504}


_CONDITIONS = Conditions(
    filter=lambda must, should, must_not: models.Filter(
        must=must, should=should, must_not=must_not
    ),
    range=lambda key, gte, lte: models.FieldCondition(
        key=key, range=models.Range(gte=gte, lte=lte)
    ),
    any_of=lambda key, values: models.FieldCondition(key=key, match=models.MatchAny(any=values)),
    equals=lambda key, value: models.FieldCondition(key=key, match=models.MatchValue(value=value)),
)


def to_qdrant_filter(f: Filter | None) -> models.Filter | None:
    return translate(f, _CONDITIONS)


class QdrantVectorIndex:
    """VectorIndex on ``qdrant_client.AsyncQdrantClient``.

    ``url`` for a server/cluster; ``location=":memory:"`` or ``path=...`` for qdrant-client's
    local mode (same API, no server; used by tests).
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        location: str | None = None,
        path: str | None = None,
        timeout: float = 10,
        page_size: int = 1000,
    ) -> None:
        if sum(x is not None for x in (url, location, path)) != 1:
            raise ValueError("give exactly one of url, location or path")
        # For messages; the client gets the URL itself.
        self._where = mask_url(url) if url else location or path
        # Local mode ignores payload indexes (and warns about each); skip creating them.
        self._local = url is None
        self._page_size = page_size
        self._client = AsyncQdrantClient(
            url=url,
            api_key=api_key,
            location=location,
            path=path,
            timeout=max(1, math.ceil(timeout)),
            # The compatibility probe is a blocking request in the constructor; check()
            # reports reachability instead.
            check_compatibility=False,
        )

    @contextmanager
    def _errors(self, collection: str | None = None) -> Iterator[None]:
        """Map transport failures to VectorIndexUnavailable, a 404 to CollectionNotFound."""
        try:
            yield
        except UnexpectedResponse as e:
            if e.status_code == 404 and collection is not None:
                raise CollectionNotFound(collection) from e
            if e.status_code in _TRANSIENT_HTTP:
                raise VectorIndexUnavailable(
                    f"qdrant at {self._where}: HTTP {e.status_code}"
                ) from e
            raise
        except _TRANSPORT_ERRORS as e:
            raise VectorIndexUnavailable(f"qdrant at {self._where} unreachable: {e}") from e
        except ValueError as e:  # local mode reports a missing collection this way
            if collection is not None and "not found" in str(e).lower():
                raise CollectionNotFound(collection) from e
            raise

    # -- collections -----------------------------------------------------------------------

    async def ensure_collection(
        self, name: str, dimension: int, indexed_fields: Mapping[str, str]
    ) -> None:
        check_field_types(indexed_fields)
        existing = await self.collection_dimension(name)
        if existing is None:
            with self._errors():
                try:
                    await self._client.create_collection(
                        name,
                        vectors_config=models.VectorParams(
                            size=dimension, distance=models.Distance.COSINE
                        ),
                    )
                except UnexpectedResponse as e:
                    if e.status_code != 409:  # 409: created concurrently by someone else
                        raise
            existing = await self.collection_dimension(name)
        if existing != dimension:
            raise DimensionMismatch(
                f"collection {name!r} has dimension {existing}, wanted {dimension}"
            )
        if self._local:
            return
        with self._errors(name):
            info = await self._client.get_collection(name)
            schema = info.payload_schema or {}
            for key, kind in indexed_fields.items():
                have = schema.get(key)
                if have is None or have.data_type != _SCHEMA[kind]:
                    await self._client.create_payload_index(
                        name, field_name=key, field_schema=_SCHEMA[kind], wait=True
                    )

    async def collection_dimension(self, collection: str) -> int | None:
        with self._errors():
            if not await self._client.collection_exists(collection):
                return None
            info = await self._client.get_collection(collection)
        vectors = info.config.params.vectors
        if isinstance(vectors, Mapping):  # named vectors: we only ever create the default one
            vectors = vectors.get("")
        return None if vectors is None else int(vectors.size)

    async def drop_collection(self, name: str) -> None:
        with self._errors():
            await self._client.delete_collection(name)

    # -- points ----------------------------------------------------------------------------

    async def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        structs = [
            models.PointStruct(
                id=int(p.id), vector=[float(x) for x in p.vector], payload=dict(p.payload)
            )
            for p in points
        ]
        with self._errors(collection):
            await self._client.upsert(collection, points=structs, wait=True)

    async def delete(self, collection: str, ids: Sequence[int]) -> None:
        if not ids:
            return
        with self._errors(collection):
            await self._client.delete(
                collection,
                points_selector=models.PointIdsList(points=[int(i) for i in ids]),
                wait=True,
            )

    async def search(
        self, collection: str, vector: Sequence[float], *, filter: Filter | None, limit: int
    ) -> list[VectorHit]:
        if limit <= 0:
            return []
        # The caller's remaining deadline bounds the search on the Qdrant server
        # too (its `timeout` is whole seconds), and our wait for it here.
        budget = deadlines.budget(None, f"searching {collection!r} in Qdrant")
        try:
            async with asyncio.timeout(budget):
                # Inside the timeout: the client's own transport timeouts still read
                # as "unreachable"; only our deadline passing reads as a deadline.
                with self._errors(collection):
                    resp = await self._client.query_points(
                        collection,
                        query=[float(x) for x in vector],
                        query_filter=to_qdrant_filter(filter),
                        limit=limit,
                        with_payload=True,
                        with_vectors=False,
                        timeout=None if budget is None else max(1, math.ceil(budget)),
                    )
        except TimeoutError as exc:
            raise DeadlineExceeded(
                f"the call's deadline passed while searching {collection!r} in Qdrant"
            ) from exc
        return [VectorHit(int(p.id), float(p.score), dict(p.payload or {})) for p in resp.points]

    async def count(self, collection: str) -> int:
        with self._errors(collection):
            return (await self._client.count(collection, exact=True)).count

    async def ids(self, collection: str) -> AsyncIterator[list[int]]:
        offset: Any = None
        while True:
            with self._errors(collection):
                records, offset = await self._client.scroll(
                    collection,
                    limit=self._page_size,
                    offset=offset,
                    with_payload=False,
                    with_vectors=False,
                )
            if records:
                yield [int(r.id) for r in records]
            if offset is None:
                return

    async def compact(self, collection: str, live: Callable[[], Awaitable[Collection[int]]]) -> int:
        """Nothing here: a Qdrant server removes deleted points from its
        segments with its own vacuum optimizer, on its own schedule, and keeps
        its WAL by its own settings (docs/privacy.md). The points were deleted
        by the index jobs an erasure waits for."""
        return 0

    async def retrieve_ids(self, collection: str, ids: Sequence[int]) -> set[int]:
        if not ids:
            return set()
        with self._errors(collection):
            found = await self._client.retrieve(
                collection, ids=[int(i) for i in ids], with_payload=False, with_vectors=False
            )
        return {int(r.id) for r in found}

    # -- lifecycle -------------------------------------------------------------------------

    async def check(self) -> str | None:
        try:
            with self._errors():
                await self._client.get_collections()
        except VectorIndexUnavailable as e:
            return str(e)
        except Exception as e:  # e.g. 401/403 from a misconfigured api key
            return f"qdrant at {self._where}: {type(e).__name__}: {e}"
        return None

    async def close(self) -> None:
        await self._client.close()
