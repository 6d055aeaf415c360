"""The unit of work: the repositories of ``core.repositories`` on one
connection, handed to a transaction function.

Each repository is a class of the store whose methods run their SQL on
``self.conn`` (``store/sql.py``'s ``OnConnection``), in the module that holds
its rows: ``store/jobs.py``'s ``SqlJobs`` is the ``JobRepository``. An
aggregate whose rows span modules is composed here of each module's part
(``SqlGraph`` is ``GraphRows``, ``EvidenceRows`` and ``MergeRows``), under the
seam's method names. ``SqlUnitOfWork`` makes a repository the first time a
function asks for it. Both databases (``store/sqlite/database.py``,
``store/postgres/database.py``) hand a ``SqlUnitOfWork`` over their connection
to every write and read; mypy checks it against ``core.repositories.UnitOfWork``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from functools import cached_property
from typing import Any

from nexus_grpc.core.repositories import InlineVectorRepository
from nexus_grpc.core.storage import Connection
from nexus_grpc.store import savepoints
from nexus_grpc.store.documents import SqlDocuments
from nexus_grpc.store.entity_merges import MergeRows
from nexus_grpc.store.episodes import SqlEpisodes
from nexus_grpc.store.erasure import ErasureStore
from nexus_grpc.store.extraction_events import SqlExtractionEvents
from nexus_grpc.store.graph import GraphRows
from nexus_grpc.store.graph_evidence import EvidenceRows
from nexus_grpc.store.jobs import SqlJobs
from nexus_grpc.store.memories import MemoryRows
from nexus_grpc.store.memory_candidates import MemoryCandidateRows
from nexus_grpc.store.memory_history import MemoryHistoryRows
from nexus_grpc.store.meta import SqlMeta
from nexus_grpc.store.project_stats import ProjectCounts
from nexus_grpc.store.projects import ProjectRows
from nexus_grpc.store.restore import SqlRestore
from nexus_grpc.store.selections import SelectionRows
from nexus_grpc.store.sessions import SqlSessions
from nexus_grpc.store.sql import OnConnection
from nexus_grpc.store.summaries import SqlSummaries
from nexus_grpc.store.usage import SqlUsage


class SqlProjects(ProjectRows, ProjectCounts):
    """``ProjectRepository`` on one connection: its parts, each in the module of
    its rows."""

    __slots__ = ()


class SqlMemories(MemoryRows, MemoryHistoryRows, MemoryCandidateRows, SelectionRows):
    """``MemoryRepository`` on one connection: its parts, each in the module of
    its rows."""

    __slots__ = ()


class SqlGraph(GraphRows, EvidenceRows, MergeRows):
    """``GraphRepository`` on one connection: its parts, each in the module of
    its rows."""

    __slots__ = ()


class NoInlineVectors(OnConnection):
    """``InlineVectorRepository`` where vectors do not live beside the rows
    (SQLite: they live in Qdrant, written by index jobs); PostgreSQL's unit of
    work has its own (store/postgres/unit_of_work.py)."""

    def put(
        self, collection: str, row_id: int, vector: Sequence[float], payload: Mapping[str, Any]
    ) -> None:
        raise TypeError("vectors live beside the rows only on PostgreSQL")


class SqlUnitOfWork:
    """``core.repositories.UnitOfWork`` on one connection of either database."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @cached_property
    def projects(self) -> SqlProjects:
        return SqlProjects(self.conn)

    @cached_property
    def sessions(self) -> SqlSessions:
        return SqlSessions(self.conn)

    @cached_property
    def episodes(self) -> SqlEpisodes:
        return SqlEpisodes(self.conn)

    @cached_property
    def memories(self) -> SqlMemories:
        return SqlMemories(self.conn)

    @cached_property
    def graph(self) -> SqlGraph:
        return SqlGraph(self.conn)

    @cached_property
    def events(self) -> SqlExtractionEvents:
        return SqlExtractionEvents(self.conn)

    @cached_property
    def summaries(self) -> SqlSummaries:
        return SqlSummaries(self.conn)

    @cached_property
    def jobs(self) -> SqlJobs:
        return SqlJobs(self.conn)

    @cached_property
    def usage(self) -> SqlUsage:
        return SqlUsage(self.conn)

    @cached_property
    def meta(self) -> SqlMeta:
        return SqlMeta(self.conn)

    @cached_property
    def documents(self) -> SqlDocuments:
        return SqlDocuments(self.conn)

    @cached_property
    def restore(self) -> SqlRestore:
        return SqlRestore(self.conn)

    @cached_property
    def vectors(self) -> InlineVectorRepository:
        return NoInlineVectors(self.conn)

    @cached_property
    def erasures(self) -> ErasureStore:
        return ErasureStore(self.conn)

    def savepoint(self, name: str) -> AbstractContextManager[None]:
        return savepoints.savepoint(self.conn, name)
