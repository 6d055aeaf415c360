"""Where the tools act: one project, and one nexus session per agent session.

``--project NAME`` names the project; it is found by name in the API key's
tenant, or created on first use.  Each agent session (the tools'
``session_id``) is a nexus session of that project, found by its
``external_id`` or created on the first write.  Reads never create anything:
a session that has written nothing yet simply has no task or session
memories.

A nexus ``external_id`` is a UUID.  An agent's session id that is a UUID
(Claude Code's are) is used as it is, so a hook that records the same
conversation under that UUID writes into the same nexus session; any other
string ("auth-work", "terminal-2") is mapped to a name-based UUID (uuid5) of
the project name and the string, so the same words in two projects are two
sessions.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.client.name_lookup import find_or_create_project, session_external_id
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.mcp.results import ToolFailure, checked

__all__ = ["AgentSession", "Workspace", "WorkspaceOptions", "external_id_for"]


def external_id_for(project: str, agent_session: str) -> str:
    """The nexus ``external_id`` of an agent's session in ``project``."""
    return session_external_id(project, agent_session)


@dataclass(frozen=True)
class WorkspaceOptions:
    """``nexus-grpc mcp``'s scope flags."""

    project: str
    #: The agent session used when a tool call names none (``--session``).
    session: str = ""
    #: The USER owner: whose USER memories the scope sees (``--user``).
    user: str = ""
    #: The PROJECT owner: the agent_id PROJECT memories are written with and
    #: reads are narrowed to (``--agent``); empty: every agent's.
    agent: str = ""


@dataclass(frozen=True)
class AgentSession:
    """An agent session as the tools see it; ``id`` 0 while nexus holds no such session."""

    name: str
    external_id: str
    id: int


class Workspace:
    """The project and sessions behind the tools, resolved through ``client`` and remembered."""

    def __init__(self, client: NexusClient, options: WorkspaceOptions) -> None:
        self.client = client
        self.options = options
        self._project_id = 0
        self._project_lock = asyncio.Lock()
        self._sessions: dict[str, int] = {}
        self._session_locks: dict[str, asyncio.Lock] = {}

    @property
    def project(self) -> str:
        return self.options.project

    # The project -----------------------------------------------------------

    async def project_id(self) -> int:
        """The project's id: found by name, else created."""
        if self._project_id:
            return self._project_id
        async with self._project_lock:
            if not self._project_id:
                self._project_id = await self._find_or_create_project()
        return self._project_id

    async def _find_or_create_project(self) -> int:
        return await checked(
            find_or_create_project(
                self.client, self.project, description="created by nexus-grpc mcp on first use"
            )
        )

    # Sessions --------------------------------------------------------------

    def session_key(self, agent_session: str) -> str:
        return external_id_for(self.project, agent_session)

    async def find_session(self, agent_session: str) -> AgentSession:
        """The agent's session as it is now; ``id`` 0 when nexus holds none yet."""
        external_id = self.session_key(agent_session)
        known = self._sessions.get(external_id)
        if known:
            return AgentSession(agent_session, external_id, known)
        project_id = await self.project_id()
        try:
            session = await self.client.get_session(external_id=external_id)
        except NexusClientError as exc:
            if exc.code == grpc.StatusCode.NOT_FOUND:
                return AgentSession(agent_session, external_id, 0)
            raise ToolFailure.from_client(exc) from exc
        self._check_project(agent_session, session, project_id)
        self._sessions[external_id] = session.id
        return AgentSession(agent_session, external_id, session.id)

    async def open_session(self, agent_session: str) -> AgentSession:
        """The agent's session, created in the project if nexus holds none yet."""
        found = await self.find_session(agent_session)
        if found.id:
            return found
        lock = self._session_locks.setdefault(found.external_id, asyncio.Lock())
        async with lock:
            known = self._sessions.get(found.external_id)
            if known:
                return AgentSession(agent_session, found.external_id, known)
            session_id = await self._create_session(agent_session, found.external_id)
            self._sessions[found.external_id] = session_id
        return AgentSession(agent_session, found.external_id, session_id)

    async def _create_session(self, agent_session: str, external_id: str) -> int:
        project_id = await self.project_id()
        metadata = {"source": "nexus-grpc mcp", "agent_session_id": agent_session}
        if self.options.agent:
            metadata["agent"] = self.options.agent
        # Who the conversation is with: the USER memories that form from
        # its exchanges (docs/memory-formation.md) are --user's, and PROJECT
        # ones --agent's.
        session = memory_pb2.Session(
            external_id=external_id,
            name=agent_session[:200],
            project_id=project_id,
            user_id=self.options.user,
            agent_id=self.options.agent,
        )
        session.metadata.update(metadata)
        try:
            created = await self.client.create_session(session=session)
            return created.id
        except NexusClientError as exc:
            if exc.code != grpc.StatusCode.ALREADY_EXISTS:
                raise ToolFailure.from_client(exc) from exc
        # Another MCP server (another terminal on the same session) created it first.
        existing = await checked(self.client.get_session(external_id=external_id))
        self._check_project(agent_session, existing, project_id)
        return existing.id

    def _check_project(
        self, agent_session: str, session: memory_pb2.Session, project_id: int
    ) -> None:
        if session.project_id != project_id:
            where = f"project {session.project_id}" if session.project_id else "no project"
            raise ToolFailure(
                "FAILED_PRECONDITION",
                f"session_id {agent_session!r} is nexus session {session.id}, which belongs to"
                f" {where}, not to project {self.project!r} ({project_id}); use another"
                " session_id for this project",
            )

    def forget_sessions(self) -> None:
        """Drops the remembered session ids (after a call said one may be gone)."""
        self._sessions.clear()
