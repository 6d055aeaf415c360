"""One conversation of a chat adapter as a nexus session of its project.

The conversation is named by the framework (LangChain's ``session_id``,
LlamaIndex's ``Memory.session_id``); its nexus session is found by the
``external_id`` that name maps to (``nexus_grpc.client.name_lookup``), read
without creating anything, and created on the first write in the project,
with the conversation's user and agent: the memories that form from its
exchanges are that user's. A session found under the name but recorded for
another user (or in another project) is refused rather than written into:
its memories would form as that other user's.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf import json_format

from nexus_grpc.client import NexusClient, NexusNotFound
from nexus_grpc.client.name_lookup import find_or_create_session, session_external_id
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations.adapter_client import AdapterClient, check_label
from nexus_grpc.integrations.exchanges import Exchange, Said, said_in

__all__ = ["ConversationSession"]

_PAGE = 1000
_MAX_NAME_CHARS = 200


class ConversationSession:
    def __init__(
        self, conn: AdapterClient, name: str, *, user_id: str, agent_id: str, source: str
    ) -> None:
        self.conn = conn
        self.name = check_label("session_id", name)
        self.user_id = check_label("user_id", user_id, required=False)
        self.agent_id = check_label("agent_id", agent_id, required=False)
        self.source = source
        self.external_id = session_external_id(conn.project, name)

    async def find(self, client: NexusClient) -> memory_pb2.Session | None:
        """The session, or None while nothing was written to it."""
        try:
            session = await client.get_session(external_id=self.external_id)
        except NexusNotFound:
            return None
        self._check(session, await self.conn.project_id(client))
        return session

    async def open(self, client: NexusClient) -> memory_pb2.Session:
        project_id = await self.conn.project_id(client)
        create = memory_pb2.Session(
            name=self.name[:_MAX_NAME_CHARS],
            project_id=project_id,
            user_id=self.user_id,
            agent_id=self.agent_id,
        )
        create.metadata.update({"source": self.source})
        session = await find_or_create_session(client, self.external_id, create=create)
        self._check(session, project_id)
        return session

    def _check(self, session: memory_pb2.Session, project_id: int) -> None:
        if session.project_id != project_id:
            where = f"project {session.project_id}" if session.project_id else "no project"
            raise ValueError(
                f"session_id {self.name!r} is nexus session {session.id}, which belongs to"
                f" {where}, not to project {self.conn.project!r} ({project_id})"
            )
        if session.user_id != self.user_id:
            raise ValueError(
                f"session_id {self.name!r} is nexus session {session.id}, the conversation"
                f" of user {session.user_id!r}, not of {self.user_id!r}"
            )

    async def read(self, client: NexusClient) -> list[Said]:
        """Every message stored, oldest first, read in pages of 1,000."""
        session = await self.find(client)
        if session is None:
            return []
        episodes: list[memory_pb2.Episode] = []
        token = ""
        while True:
            page = await client.list_episodes(
                session_id=session.id, page_size=_PAGE, page_token=token
            )
            episodes += page.episodes
            token = page.next_page_token
            if not token:
                break
        # ListEpisodes pages newest first; a chat history reads oldest first.
        return [
            said
            for e in reversed(episodes)
            for said in said_in(
                e.user_message, e.ai_response, json_format.MessageToDict(e.metadata)
            )
        ]

    async def write(self, client: NexusClient, exchanges: Sequence[Exchange]) -> None:
        """Each exchange as an episode of the session (opened if need be)."""
        if not exchanges:
            return
        session = await self.open(client)
        for exchange in exchanges:
            await client.create_episode(
                session_id=session.id,
                user_message=exchange.user,
                ai_response=exchange.assistant,
                metadata=exchange.metadata() or None,
            )

    async def delete(self, client: NexusClient) -> None:
        """Deletes the session and its episodes (memories formed from them stay)."""
        session = await self.find(client)
        if session is not None:
            await client.delete_session(id=session.id)
