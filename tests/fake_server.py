"""A tiny in-process grpc.aio server with fake servicers: a handful of RPCs
answering canned-but-valid messages, for the client, doctor and bench tests
that need a server without the real service behind it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
from collections.abc import AsyncIterator

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc

REQUEST_ID = "req-test-1"


class FakeMemory(memory_grpc.MemoryServiceServicer):
    def __init__(self) -> None:
        self.projects: dict[int, memory_pb2.Project] = {}
        self.sessions: dict[int, memory_pb2.Session] = {}
        self.episodes: dict[int, memory_pb2.Episode] = {}
        self.by_request_id: dict[str, int] = {}
        # Ids are never handed out twice, deletes or not.
        self._ids = {kind: itertools.count(1) for kind in ("project", "session", "episode")}
        #: What was deleted, in order: ("project" or "session", id).
        self.deleted: list[tuple[str, int]] = []
        self.seen_metadata: list[dict[str, str]] = []
        self.state = "SERVING"

    def _note(self, context: grpc.aio.ServicerContext) -> None:
        self.seen_metadata.append(
            {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        )

    async def _abort(
        self, context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str
    ) -> None:
        context.set_trailing_metadata((("x-request-id", REQUEST_ID),))
        await context.abort(code, message)

    async def CreateProject(self, request, context):
        self._note(context)
        project = memory_pb2.Project()
        project.CopyFrom(request.project)
        project.id = next(self._ids["project"])
        self.projects[project.id] = project
        return project

    async def DeleteProject(self, request, context):
        """As the service does: the project goes with its sessions and their
        episodes, as an erasure that is done at once here."""
        self._note(context)
        if self.projects.pop(request.id, None) is None:
            await self._abort(context, grpc.StatusCode.NOT_FOUND, f"project {request.id} not found")
        for session_id in [s.id for s in self.sessions.values() if s.project_id == request.id]:
            del self.sessions[session_id]
            for episode_id in [e.id for e in self.episodes.values() if e.session_id == session_id]:
                del self.episodes[episode_id]
        self.deleted.append(("project", request.id))
        return memory_pb2.DeleteProjectResponse(erasure_id=request.id)

    async def WatchErasure(self, request, context):
        self._note(context)
        yield memory_pb2.Erasure(
            id=request.id,
            kind=memory_pb2.ERASURE_KIND_PROJECT,
            state=memory_pb2.ERASURE_STATE_DONE,
            phase="done",
        )

    async def DeleteSession(self, request, context):
        self._note(context)
        if self.sessions.pop(request.id, None) is None:
            await self._abort(context, grpc.StatusCode.NOT_FOUND, f"session {request.id} not found")
        self.deleted.append(("session", request.id))
        for episode_id in [e.id for e in self.episodes.values() if e.session_id == request.id]:
            del self.episodes[episode_id]
        return memory_pb2.DeleteSessionResponse()

    async def CreateSession(self, request, context):
        self._note(context)
        session = memory_pb2.Session()
        session.CopyFrom(request.session)
        session.id = next(self._ids["session"])
        session.external_id = session.external_id or f"ext-{session.id}"
        self.sessions[session.id] = session
        return session

    async def CreateEpisode(self, request, context):
        self._note(context)
        if request.session_id not in self.sessions:
            await self._abort(
                context, grpc.StatusCode.NOT_FOUND, f"session {request.session_id} not found"
            )
        if request.request_id and request.request_id in self.by_request_id:
            return self.episodes[self.by_request_id[request.request_id]]
        episode = memory_pb2.Episode(
            id=next(self._ids["episode"]),
            session_id=request.session_id,
            user_message=request.user_message,
            ai_response=request.ai_response,
            embedding_state=memory_pb2.JOB_STATE_PENDING,
            extraction_state=memory_pb2.JOB_STATE_PENDING,
        )
        if request.HasField("metadata"):
            episode.metadata.CopyFrom(request.metadata)
        episode.create_time.GetCurrentTime()
        self.episodes[episode.id] = episode
        if request.request_id:
            self.by_request_id[request.request_id] = episode.id
        return episode

    async def GetEpisode(self, request, context):
        self._note(context)
        episode = self.episodes.get(request.id)
        if episode is None:
            await self._abort(
                context, grpc.StatusCode.NOT_FOUND, f"episode {request.id} not found"
            )
        return episode

    async def SearchEpisodes(self, request, context):
        self._note(context)
        if not request.query.strip():
            await self._abort(context, grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        words = set(request.query.lower().split())
        limit = request.limit or 10
        found = 0
        for episode in reversed(list(self.episodes.values())):
            text = f"{episode.user_message} {episode.ai_response}".lower()
            if words & set(text.replace(".", " ").split()):
                found += 1
                yield memory_pb2.SearchHit(
                    episode=episode,
                    score=1.0 / found,
                    snippet=episode.user_message[:40],
                    sources=[memory_pb2.SEARCH_SOURCE_KEYWORD],
                )
                if found >= limit:
                    return

    async def GetServiceStatus(self, request, context):
        self._note(context)
        degraded = self.state != "SERVING"
        return memory_pb2.ServiceStatus(
            state=self.state,
            schema_version=3,
            embedding_model="minilm-int8",
            embedding_dimension=384,
            dependencies=[
                memory_pb2.DependencyStatus(name="sqlite", ok=True, detail="wal"),
                memory_pb2.DependencyStatus(
                    name="llm", ok=not degraded, detail="connection refused" if degraded else ""
                ),
            ],
            queues=[
                memory_pb2.QueueStatus(
                    kind="embedding", pending=2, failed=0, oldest_pending_age_seconds=1.5
                ),
                memory_pb2.QueueStatus(kind="extraction", pending=0, failed=1),
            ],
        )


class FakeGraph(graph_grpc.GraphServiceServicer):
    """WatchExtractions that never has an event: watchers wait until they cancel."""

    async def WatchExtractions(self, request, context):
        if request.session_id == -1:
            yield graph_pb2.ExtractionEvent(event_id=1, status=graph_pb2.EXTRACTION_STATUS_DONE)
        await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def running_server() -> AsyncIterator[tuple[str, FakeMemory]]:
    """Starts the fake server on 127.0.0.1:0; yields its target and memory servicer."""
    server = grpc.aio.server()
    memory = FakeMemory()
    memory_grpc.add_MemoryServiceServicer_to_server(memory, server)
    graph_grpc.add_GraphServiceServicer_to_server(FakeGraph(), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set(
        "nexus.memory.v1.MemoryService", health_pb2.HealthCheckResponse.SERVING
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", memory
    finally:
        await server.stop(None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
