"""nexus.memory.v1.MemoryService."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from nexus_grpc.api import convert, pages
from nexus_grpc.app import App
from nexus_grpc.auth import current_principal
from nexus_grpc.core.models import SearchMode, TimeWindow
from nexus_grpc.core.requests import request_id_var
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.store.memory_history import ChangedBy

Ctx: TypeAlias = grpc.aio.ServicerContext


class MemoryServicer(memory_grpc.MemoryServiceServicer):
    def __init__(self, app: App) -> None:
        self.app = app
        self.conv = app.conversations
        self.max_bytes = app.settings.max_message_bytes

    # Projects

    async def CreateProject(
        self, request: memory_pb2.CreateProjectRequest, context: Ctx
    ) -> memory_pb2.Project:
        project = await self.conv.create_project(convert.project_values(request.project))
        return convert.project(project)

    async def GetProject(
        self, request: memory_pb2.GetProjectRequest, context: Ctx
    ) -> memory_pb2.Project:
        return convert.project(await self.conv.get_project(request.id))

    async def ListProjects(
        self, request: memory_pb2.ListProjectsRequest, context: Ctx
    ) -> memory_pb2.ListProjectsResponse:
        page = await self.conv.list_projects(request.page_size, request.page_token)
        items, token = pages.fitted(page, convert.project, self.max_bytes)
        return memory_pb2.ListProjectsResponse(projects=items, next_page_token=token)

    async def UpdateProject(
        self, request: memory_pb2.UpdateProjectRequest, context: Ctx
    ) -> memory_pb2.Project:
        project = await self.conv.update_project(
            request.project.id,
            convert.project_values(request.project),
            list(request.update_mask.paths),
        )
        return convert.project(project)

    async def DeleteProject(
        self, request: memory_pb2.DeleteProjectRequest, context: Ctx
    ) -> memory_pb2.DeleteProjectResponse:
        detached = await self.conv.delete_project(request.id)
        return memory_pb2.DeleteProjectResponse(detached_sessions=detached)

    # Sessions

    async def CreateSession(
        self, request: memory_pb2.CreateSessionRequest, context: Ctx
    ) -> memory_pb2.Session:
        s = request.session
        session = await self.conv.create_session(
            s.external_id, s.name, s.project_id, convert.from_struct(s.metadata)
        )
        return convert.session(session)

    async def GetSession(
        self, request: memory_pb2.GetSessionRequest, context: Ctx
    ) -> memory_pb2.Session:
        key = request.WhichOneof("key")
        if key is None:
            raise InvalidArgument("one of id or external_id is required")
        session = await self.conv.get_session(request.id, request.external_id)
        return convert.session(session)

    async def ListSessions(
        self, request: memory_pb2.ListSessionsRequest, context: Ctx
    ) -> memory_pb2.ListSessionsResponse:
        page = await self.conv.list_sessions(
            request.page_size, request.page_token, request.project_id
        )
        items, token = pages.fitted(page, convert.session, self.max_bytes)
        return memory_pb2.ListSessionsResponse(sessions=items, next_page_token=token)

    async def UpdateSession(
        self, request: memory_pb2.UpdateSessionRequest, context: Ctx
    ) -> memory_pb2.Session:
        s = request.session
        session = await self.conv.update_session(
            s.id,
            {
                "name": s.name,
                "project_id": s.project_id,
                "metadata": convert.from_struct(s.metadata),
            },
            list(request.update_mask.paths),
        )
        return convert.session(session)

    async def DeleteSession(
        self, request: memory_pb2.DeleteSessionRequest, context: Ctx
    ) -> memory_pb2.DeleteSessionResponse:
        deleted = await self.conv.delete_session(request.id)
        return memory_pb2.DeleteSessionResponse(deleted_episodes=deleted)

    # Episodes

    async def CreateEpisode(
        self, request: memory_pb2.CreateEpisodeRequest, context: Ctx
    ) -> memory_pb2.Episode:
        episode = await self.conv.create_episode(
            request.session_id,
            request.user_message,
            request.ai_response,
            convert.from_struct(request.metadata),
            request.request_id,
            request.project_id,
            convert.time_field(request, "occur_time"),
        )
        return convert.episode(episode)

    async def GetEpisode(
        self, request: memory_pb2.GetEpisodeRequest, context: Ctx
    ) -> memory_pb2.Episode:
        return convert.episode(await self.conv.get_episode(request.id))

    async def ListEpisodes(
        self, request: memory_pb2.ListEpisodesRequest, context: Ctx
    ) -> memory_pb2.ListEpisodesResponse:
        page = await self.conv.list_episodes(
            request.session_id, request.page_size, request.page_token
        )
        items, token = pages.fitted(page, convert.episode, self.max_bytes)
        return memory_pb2.ListEpisodesResponse(episodes=items, next_page_token=token)

    async def DeleteEpisode(
        self, request: memory_pb2.DeleteEpisodeRequest, context: Ctx
    ) -> memory_pb2.DeleteEpisodeResponse:
        await self.conv.delete_episode(request.id)
        return memory_pb2.DeleteEpisodeResponse()

    async def SearchEpisodes(
        self, request: memory_pb2.SearchEpisodesRequest, context: Ctx
    ) -> AsyncIterator[memory_pb2.SearchHit]:
        mode: SearchMode = convert.search_mode(request.mode)
        window = TimeWindow(
            convert.time_field(request, "start_time"), convert.time_field(request, "end_time")
        )
        async for hit in self.app.episode_search.search(
            request.query,
            request.session_id,
            request.project_id,
            request.limit,
            mode,
            on_degraded=_report_degraded(context),
            window=window,
        ):
            yield convert.episode_hit(hit)

    # Service status

    async def GetServiceStatus(
        self, request: memory_pb2.GetServiceStatusRequest, context: Ctx
    ) -> memory_pb2.ServiceStatus:
        status = await self.app.status()
        return memory_pb2.ServiceStatus(
            state=status.state,
            schema_version=status.schema_version,
            embedding_model=status.embedding_model,
            embedding_dimension=status.embedding_dimension,
            dependencies=[
                memory_pb2.DependencyStatus(name=d.name, ok=d.ok, detail=d.detail)
                for d in status.dependencies
            ],
            queues=[
                memory_pb2.QueueStatus(
                    kind=q.kind,
                    pending=q.pending,
                    failed=q.failed,
                    oldest_pending_age_seconds=q.oldest_pending_age,
                )
                for q in status.queues
            ],
            event_loop=convert.event_loop(status.event_loop),
        )

    async def ReconcileIndex(
        self, request: memory_pb2.ReconcileIndexRequest, context: Ctx
    ) -> memory_pb2.ReconcileIndexResponse:
        result = await self.app.reconciler.reconcile()
        return memory_pb2.ReconcileIndexResponse(
            requeued=result.requeued, removed_orphans=result.removed_orphans
        )

    # Memories (PROJECT/USER, tiers, selection)

    async def CreateMemory(
        self, request: memory_pb2.CreateMemoryRequest, context: Ctx
    ) -> memory_pb2.Memory:
        created = await self.app.memories.create(
            convert.memory_values(request.memory), request.request_id
        )
        return convert.memory(created)

    async def GetMemory(
        self, request: memory_pb2.GetMemoryRequest, context: Ctx
    ) -> memory_pb2.Memory:
        return convert.memory(
            await self.app.memories.get(request.id, request.user_id, request.session_id)
        )

    async def ListMemories(
        self, request: memory_pb2.ListMemoriesRequest, context: Ctx
    ) -> memory_pb2.ListMemoriesResponse:
        page = await self.app.memories.list_visible(
            convert.memory_scope(request.scope),
            request.kind,
            request.page_size,
            request.page_token,
        )
        items, token = pages.fitted(page, convert.memory, self.max_bytes)
        return memory_pb2.ListMemoriesResponse(memories=items, next_page_token=token)

    async def UpdateMemory(
        self, request: memory_pb2.UpdateMemoryRequest, context: Ctx
    ) -> memory_pb2.Memory:
        updated = await self.app.memories.update(
            request.memory.id,
            convert.memory_values(request.memory),
            list(request.update_mask.paths),
            request.user_id,
            request.session_id,
            _changed_by(),
        )
        return convert.memory(updated)

    async def DeleteMemory(
        self, request: memory_pb2.DeleteMemoryRequest, context: Ctx
    ) -> memory_pb2.DeleteMemoryResponse:
        await self.app.memories.delete(
            request.id, request.user_id, request.session_id, _changed_by()
        )
        return memory_pb2.DeleteMemoryResponse()

    async def ListMemoryHistory(
        self, request: memory_pb2.ListMemoryHistoryRequest, context: Ctx
    ) -> memory_pb2.ListMemoryHistoryResponse:
        page = await self.app.memories.history(
            request.memory_id,
            request.user_id,
            request.session_id,
            request.page_size,
            request.page_token,
        )
        return memory_pb2.ListMemoryHistoryResponse(
            revisions=[convert.memory_revision(r) for r in page.items],
            next_page_token=page.next_token,
        )

    async def SearchMemories(
        self, request: memory_pb2.SearchMemoriesRequest, context: Ctx
    ) -> AsyncIterator[memory_pb2.MemoryHit]:
        async for hit in self.app.memories.search(
            request.query,
            convert.memory_scope(request.scope),
            request.limit,
            convert.search_mode(request.mode),
            on_degraded=_report_degraded(context),
        ):
            yield convert.memory_hit(hit)

    async def SelectMemories(
        self, request: memory_pb2.SelectMemoriesRequest, context: Ctx
    ) -> AsyncIterator[memory_pb2.SelectedMemory]:
        async for selected in self.app.selector.select(
            request.prompt,
            convert.memory_scope(request.scope),
            request.thread_id,
            request.thread_summary,
            request.limit,
        ):
            yield convert.selected_memory(selected)

    async def ListMemoryUsage(
        self, request: memory_pb2.ListMemoryUsageRequest, context: Ctx
    ) -> memory_pb2.ListMemoryUsageResponse:
        key = request.WhichOneof("key")
        if key is None:
            raise InvalidArgument("one of thread_id or memory_id is required")
        page = await self.app.memories.usage(
            request.thread_id if key == "thread_id" else "",
            request.memory_id if key == "memory_id" else None,
            request.user_id,
            request.project_id,
            request.page_size,
            request.page_token,
        )
        items, token = pages.fitted(page, convert.memory_usage, self.max_bytes)
        return memory_pb2.ListMemoryUsageResponse(usage=items, next_page_token=token)


def _changed_by() -> ChangedBy:
    """Who is making this change, for the memory's history."""
    principal = current_principal()
    rid = request_id_var.get()
    return ChangedBy(
        request_id="" if rid == "-" else rid, principal=principal.name if principal else ""
    )


def _report_degraded(context: Ctx):
    """Tell the client, in trailing metadata, that a hybrid search answered
    from keywords alone because the semantic path was down."""

    def report(reason: str) -> None:
        ascii_reason = " ".join(reason.encode("ascii", "replace").decode().split())[:500]
        context.set_trailing_metadata(
            (("x-request-id", request_id_var.get()), ("x-nexus-degraded", ascii_reason))
        )

    return report
