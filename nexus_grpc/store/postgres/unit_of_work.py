"""PostgreSQL's unit of work: the shared repositories, and vectors beside the rows."""

from __future__ import annotations

from functools import cached_property

from nexus_grpc.core.repositories import InlineVectorRepository
from nexus_grpc.store.postgres import vectors
from nexus_grpc.store.unit_of_work import SqlUnitOfWork, Table, bound


class InlineVectorTable(Table):
    """``InlineVectorRepository``: pgvector points in the row's own transaction."""

    put = bound(vectors.put)


class PostgresUnitOfWork(SqlUnitOfWork):
    @cached_property
    def vectors(self) -> InlineVectorRepository:
        return InlineVectorTable(self.conn)
