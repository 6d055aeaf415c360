"""A new row's vector, written in the row's own PostgreSQL transaction.

With ``--database-url`` and no ``--qdrant-url``, the vector index is a set
of pgvector tables in the same database (store/postgres/vector_index.py creates them,
``vectors_<collection>``: id, embedding, payload). A write that already has
its row's vector (domain/inline_vectors.py embeds before the transaction)
stores it here, beside the row, so the two commit or roll back together and
cannot drift. The columns and the text form of a vector are vector_index.py's;
the tests prove each side reads what the other writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from nexus_grpc.core.storage import StoreError
from nexus_grpc.core.vectors import VectorTableMissing
from nexus_grpc.store.sql import OnConnection

_NAME = re.compile(r"[a-z][a-z0-9_]{0,40}")

#: The SQLSTATE of "relation does not exist".
UNDEFINED_TABLE = "42P01"


def _vector(values: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in values) + "]"


class PgInlineVectors(OnConnection):
    """``InlineVectorRepository`` on one connection."""

    __slots__ = ()

    def put(
        self,
        collection: str,
        row_id: int,
        vector: Sequence[float],
        payload: Mapping[str, Any],
    ) -> None:
        """Upsert one point of ``collection`` in the caller's transaction."""
        if not _NAME.fullmatch(collection):
            raise ValueError(f"bad collection name {collection!r}")
        try:
            self.conn.execute(
                f"INSERT INTO vectors_{collection} (id, embedding, payload)"
                " VALUES (?, ?::vector, ?::jsonb) ON CONFLICT (id) DO UPDATE"
                " SET embedding = excluded.embedding, payload = excluded.payload",
                (int(row_id), _vector(vector), json.dumps(dict(payload))),
            )
        except StoreError as exc:
            if getattr(exc.__cause__, "sqlstate", None) == UNDEFINED_TABLE:
                raise VectorTableMissing(str(exc).splitlines()[0]) from exc
            raise
