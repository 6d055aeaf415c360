"""PostgreSQL's unit of work: the shared repositories, and vectors beside the rows."""

from __future__ import annotations

from functools import cached_property

from nexus_grpc.core.repositories import InlineVectorRepository
from nexus_grpc.store.postgres.vectors import PgInlineVectors
from nexus_grpc.store.unit_of_work import SqlUnitOfWork


class PostgresUnitOfWork(SqlUnitOfWork):
    @cached_property
    def vectors(self) -> InlineVectorRepository:
        return PgInlineVectors(self.conn)
