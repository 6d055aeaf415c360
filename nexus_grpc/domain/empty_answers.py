"""Why an answer is empty, when the server knows.

An empty list reads the same whether there is nothing, nothing yet, or
nothing that matched: without an LLM no memory forms and no entity is
extracted, a project may have formation off, jobs may still be pending.
The servicers ask here when a list, search or selection comes back empty and
send the answer in the ``x-nexus-empty-reason`` trailer (api/trailers.py) as
``CODE: sentence``; the typed clients and the MCP tools surface it.

Only counts and settings the caller may already read are said: the project
is checked against the caller's tenant, and a user scope counts only that
user's sessions.
"""

from __future__ import annotations

from dataclasses import dataclass

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.models import (
    DEFAULT_MEMORY_FORMATION,
    MemoryFormation,
    MemoryKind,
    SearchMode,
)
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain.memory_visibility import MemoryScope
from nexus_grpc.domain.retrieval.episode_scope import episode_scope
from nexus_grpc.errors import NotFound

#: The codes, stable for a program to switch on (the sentence after is for people).
LLM_OFF = "LLM_OFF"
FORMATION_OFF = "FORMATION_OFF"
JOBS_PENDING = "JOBS_PENDING"
NOTHING_STORED = "NOTHING_STORED"
NO_MATCH = "NO_MATCH"
MODEL_CHOSE_NONE = "MODEL_CHOSE_NONE"


@dataclass(frozen=True)
class EmptyReason:
    code: str
    text: str

    def __str__(self) -> str:
        return f"{self.code}: {self.text}"


def _exchanges(n: int) -> str:
    return f"{n} exchange{'' if n == 1 else 's'}"


class EmptyAnswers:
    def __init__(self, db: Database, *, llm_configured: bool) -> None:
        self.db = db
        self.llm_configured = llm_configured

    async def memories(self, scope: MemoryScope) -> EmptyReason:
        """Why ``scope`` sees no memory at all."""
        return await self.db.read_in_transaction(lambda c: self._memories(c, scope))

    def _memories(self, uow: UnitOfWork, scope: MemoryScope) -> EmptyReason:
        project_id = scope.project_id
        if not project_id or not uow.projects.exists(project_id, tenancy.visible()):
            return EmptyReason(
                NOTHING_STORED,
                "no memory is stored in this scope (memories form from a project's"
                " conversations; outside one, only those clients store)",
            )
        setting = uow.projects.memory_formation(project_id)
        mode = MemoryFormation(setting) if setting else DEFAULT_MEMORY_FORMATION
        if mode == MemoryFormation.OFF:
            return EmptyReason(
                FORMATION_OFF,
                f"memory formation is OFF for project {project_id}: its memories are only"
                " those clients store (CreateMemory)",
            )
        if mode == MemoryFormation.USER_AND_PROJECT:
            sessions = uow.sessions.project_session_ids(project_id)
        elif scope.user_id:
            sessions = uow.sessions.user_session_ids(project_id, scope.user_id)
        else:
            return EmptyReason(
                NOTHING_STORED,
                f"no memory is stored in this scope: project {project_id} forms only USER"
                " memories (memory_formation USER), so a scope without a user_id sees only"
                " the PROJECT memories clients store",
            )
        backlog = uow.episodes.backlog(sessions)
        if backlog.not_formed:
            return self._waiting(backlog.not_formed, "memory formation", "memory has formed")
        if not backlog.episodes:
            whose = (
                f"no session of user {scope.user_id!r} in project {project_id}"
                if scope.user_id and mode == MemoryFormation.USER
                else f"no session of project {project_id}"
            )
            return EmptyReason(
                NOTHING_STORED,
                f"no memory is stored in this scope, and {whose} has an exchange to form one"
                " from (USER memories form from sessions that name their user_id)",
            )
        return EmptyReason(
            NOTHING_STORED,
            f"no memory is stored in this scope: formation read {_exchanges(backlog.episodes)}"
            " and found no lasting fact or preference to keep",
        )

    async def listed(self, scope: MemoryScope, kind: int) -> EmptyReason:
        """Why a listing of ``scope``'s memories (of ``kind``, when set) is empty."""

        def read(uow: UnitOfWork) -> EmptyReason:
            if kind and uow.memories.list_visible(scope, limit=1):
                return EmptyReason(
                    NO_MATCH, f"this scope sees memories, but none of kind {MemoryKind(kind).name}"
                )
            return self._memories(uow, scope)

        return await self.db.read_in_transaction(read)

    async def memory_search(self, scope: MemoryScope, mode: SearchMode) -> EmptyReason:
        """Why a search of memories found nothing: the scope sees none (as
        ``memories``), the semantic index has not caught up, or none matched."""
        return await self.db.read_in_transaction(lambda c: self._memory_search(c, scope, mode))

    def _memory_search(self, uow: UnitOfWork, scope: MemoryScope, mode: SearchMode) -> EmptyReason:
        if not uow.memories.list_visible(scope, limit=1):
            return self._memories(uow, scope)
        if mode == SearchMode.SEMANTIC:
            waiting = uow.jobs.pending_count(jobs.INDEX_MEMORY)
            if waiting:
                return EmptyReason(
                    JOBS_PENDING,
                    f"{waiting} memor{'y is' if waiting == 1 else 'ies are'} not embedded yet:"
                    " semantic search finds them once they are (keyword search already does)",
                )
        return EmptyReason(NO_MATCH, "no memory this scope sees matches the query")

    async def episodes(self, session_id: int, project_id: int, mode: SearchMode) -> EmptyReason:
        """Why a search of episodes found nothing."""

        def read(uow: UnitOfWork) -> EmptyReason:
            sessions = episode_scope(uow, session_id, project_id)
            backlog = uow.episodes.backlog(sessions)
            where = "this project" if project_id or len(sessions) > 1 else "this session"
            if not backlog.episodes:
                return EmptyReason(NOTHING_STORED, f"no exchange is stored in {where} yet")
            if mode == SearchMode.SEMANTIC and backlog.not_indexed:
                return EmptyReason(
                    JOBS_PENDING,
                    f"{backlog.not_indexed} of the {_exchanges(backlog.episodes)} in {where}"
                    " are not indexed yet: semantic search finds them once they are (keyword"
                    " search already does)",
                )
            return EmptyReason(
                NO_MATCH,
                f"none of the {_exchanges(backlog.episodes)} in {where} matches the query"
                " (within the time window and the project's retention, when set)",
            )

        return await self.db.read_in_transaction(read)

    async def entities(self, project_id: int, session_id: int) -> EmptyReason:
        """Why a search of a graph found nothing."""

        def read(uow: UnitOfWork) -> EmptyReason:
            if project_id:
                sessions = uow.sessions.project_session_ids(project_id)
            else:
                sessions = [session_id]
            backlog = uow.episodes.backlog(sessions)
            if backlog.not_extracted:
                return self._waiting(
                    backlog.not_extracted, "entity extraction", "entity has been extracted"
                )
            return EmptyReason(NO_MATCH, "no entity of this graph matches the query")

        return await self.db.read_in_transaction(read)

    async def graph(self, project_id: int, session_id: int) -> EmptyReason:
        """Why a graph (a project's, or that of a session outside any project)
        holds no entity at all (ListEntities' first page, unfiltered). A graph
        the caller may not see reads as one with nothing stored, in the same
        words."""

        def read(uow: UnitOfWork) -> EmptyReason:
            tenant = tenancy.visible()
            sessions: list[int] = []
            if project_id and uow.projects.exists(project_id, tenant):
                sessions = uow.sessions.project_session_ids(project_id)
            elif session_id:
                try:
                    uow.sessions.get(session_id, tenant)
                    sessions = [session_id]
                except NotFound:
                    sessions = []
            backlog = uow.episodes.backlog(sessions)
            if backlog.not_extracted:
                return self._waiting(
                    backlog.not_extracted, "entity extraction", "entity has been extracted"
                )
            if not backlog.episodes:
                return EmptyReason(
                    NOTHING_STORED,
                    "no entity is stored in this graph, and no exchange of it is stored to"
                    " extract one from (entities come from a project's conversations, or"
                    " UpsertEntity)",
                )
            return EmptyReason(
                NOTHING_STORED,
                f"no entity is stored in this graph: extraction found none in its"
                f" {_exchanges(backlog.episodes)}",
            )

        return await self.db.read_in_transaction(read)

    def _waiting(self, n: int, job: str, outcome: str) -> EmptyReason:
        wait = "waits" if n == 1 else "wait"
        if not self.llm_configured:
            return EmptyReason(
                LLM_OFF,
                f"no LLM server is configured (--ollama-url or --llm-url), so no {outcome}"
                f" yet: {_exchanges(n)} {wait} for {job}",
            )
        return EmptyReason(JOBS_PENDING, f"{_exchanges(n)} still {wait} for {job}")


def model_chose_none(read: int) -> EmptyReason:
    return EmptyReason(
        MODEL_CHOSE_NONE,
        f"the selection model read the titles of {read} memor{'y' if read == 1 else 'ies'}"
        " and chose none for this prompt",
    )


def semantic_found_none(read: int) -> EmptyReason:
    return EmptyReason(
        NO_MATCH,
        f"semantic ranking found none of the {read} memor{'y' if read == 1 else 'ies'} this"
        " scope sees related to the prompt",
    )
