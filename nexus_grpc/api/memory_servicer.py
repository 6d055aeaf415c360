"""nexus.memory.v1.MemoryService."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from nexus_grpc.api import (
    convert,
    erasure_convert,
    graph_convert,
    pages,
    restore_convert,
    summary_convert,
    trailers,
    usage_convert,
)
from nexus_grpc.app import App
from nexus_grpc.core import tenancy
from nexus_grpc.core.graph import (
    Entity,
    EntityAlias,
    EntityEpisode,
    EntityMerge,
    Evidence,
    Relationship,
)
from nexus_grpc.core.models import Episode, Project, SearchMode, Session, TimeWindow
from nexus_grpc.core.records import ChangedBy, Memory, MemoryUsage, Revision
from nexus_grpc.domain.conversations import EpisodeInput, Imported
from nexus_grpc.domain.episode_import import EpisodeImport
from nexus_grpc.domain.restore import (
    RestoreIntake,
)
from nexus_grpc.domain.user_export import UserExportItem
from nexus_grpc.errors import DeadlineExceeded, InvalidArgument, NexusError, Unavailable
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.rpc.auth import current_principal
from nexus_grpc.rpc.error_status import status_code
from nexus_grpc.rpc.interception import Undecodable
from nexus_grpc.rpc.requests import request_id_var

Ctx: TypeAlias = grpc.aio.ServicerContext


class MemoryServicer(memory_grpc.MemoryServiceServicer):
    def __init__(self, app: App) -> None:
        self.app = app
        self.conv = app.conversations
        self.erasures = app.erasures
        self.max_bytes = app.settings.max_message_bytes

    # Projects

    async def CreateProject(
        self, request: memory_pb2.CreateProjectRequest, context: Ctx
    ) -> memory_pb2.Project:
        if request.project.tenant:
            # Output only; said rather than ignored, so no client believes it
            # chose where its project went.
            raise InvalidArgument(
                "project.tenant is output only: a project belongs to the tenant of the key"
                " that creates it; leave it empty",
                field="project.tenant",
            )
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
        erasure = await self.conv.delete_project(request.id, _changed_by().principal)
        return memory_pb2.DeleteProjectResponse(erasure_id=erasure.id)

    async def GetProjectStats(
        self, request: memory_pb2.GetProjectStatsRequest, context: Ctx
    ) -> memory_pb2.ProjectStats:
        stats = await self.app.project_stats.get(
            request.project_id, request.top_entities, list(request.read_mask.paths)
        )
        return memory_pb2.ProjectStats(
            project_id=stats.project_id,
            sessions=stats.sessions,
            episodes=stats.episodes,
            project_memories=stats.project_memories,
            user_memories=stats.user_memories,
            archived_memories=stats.archived_memories,
            entities=stats.entities,
            relationships=stats.relationships,
            jobs_pending=stats.jobs_pending,
            jobs_failed=stats.jobs_failed,
            users=[memory_pb2.UserMemoryCount(user_id=u, memories=n) for u, n in stats.users],
            user_count=stats.user_count,
            top_entity_ids=stats.top_entity_ids,
        )

    # Sessions

    async def CreateSession(
        self, request: memory_pb2.CreateSessionRequest, context: Ctx
    ) -> memory_pb2.Session:
        s = request.session
        session = await self.conv.create_session(
            s.external_id,
            s.name,
            s.project_id,
            convert.from_struct(s.metadata),
            user_id=s.user_id,
            agent_id=s.agent_id,
        )
        return convert.session(session)

    async def GetSession(
        self, request: memory_pb2.GetSessionRequest, context: Ctx
    ) -> memory_pb2.Session:
        key = request.WhichOneof("key")
        if key is None:
            raise InvalidArgument(
                "one of id or external_id is required", fields=("id", "external_id")
            )
        session = await self.conv.get_session(request.id, request.external_id, request.tenant)
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

    async def ImportEpisodes(
        self, requests: AsyncIterator[memory_pb2.ImportEpisodesRequest], context: Ctx
    ) -> memory_pb2.ImportEpisodesResponse:
        """Each item's outcome, in stream order, once every batch is durable
        (domain/episode_import.py)."""
        items = (_import_item(request) async for request in requests)
        outcomes = await EpisodeImport(self.conv).run(items, lambda: _still_wanted(context))
        return _import_answer(outcomes)

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
        found = 0
        async for hit in self.app.episode_search.search(
            request.query,
            request.session_id,
            request.project_id,
            request.limit,
            mode,
            on_degraded=trailers.reporter(context, trailers.DEGRADED),
            window=window,
            rerank=not request.skip_rerank,
            explain=request.explain,
        ):
            found += 1
            yield convert.episode_hit(hit)
        if not found:
            why = await self.app.empty_answers.episodes(
                request.session_id, request.project_id, mode
            )
            trailers.add(context, trailers.EMPTY_REASON, str(why))

    async def ExportProject(
        self, request: memory_pb2.ExportProjectRequest, context: Ctx
    ) -> AsyncIterator[memory_pb2.ExportRecord]:
        async for item in self.app.export.records(request.project_id):
            yield _export_record(item)

    async def RestoreProject(
        self, requests: AsyncIterator[memory_pb2.RestoreProjectRequest], context: Ctx
    ) -> memory_pb2.RestoreProjectResponse:
        """Reads the whole stream (bounded, domain/restore.RestoreIntake), then
        restores it in one transaction."""
        intake = RestoreIntake()
        async for request in requests:
            intake.next_record()
            if isinstance(request, Undecodable):
                intake.undecodable(request.message)
            elif intake.weighs(request.ByteSize()):
                try:
                    intake.add(restore_convert.record(request.record))
                except NexusError as exc:
                    intake.failed(request.record.WhichOneof("record") or "empty", exc)
        items = intake.items()
        _still_wanted(context, "nothing was restored")
        restored = await self.app.restore.restore(items)
        counts = restored.counts
        return memory_pb2.RestoreProjectResponse(
            project_id=restored.project_id,
            sessions=counts["session"],
            episodes=counts["episode"],
            memories=counts["memory"],
            memory_revisions=counts["memory_revision"],
            entities=counts["entity"],
            relationships=counts["relationship"],
            summaries=counts["summary"],
            erased_records=restored.erased,
        )

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
                memory_pb2.DependencyStatus(name=d.name, ok=d.ok, detail=d.detail, off=d.off)
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
            tenant=tenancy.own(self.app.settings.default_tenant),
            budgets=usage_convert.budgets(status.budgets),
        )

    async def GetUsage(
        self, request: memory_pb2.GetUsageRequest, context: Ctx
    ) -> memory_pb2.GetUsageResponse:
        report = await self.app.usage_reports.get(
            request.project_id,
            request.tenant,
            convert.time_field(request, "start_time"),
            convert.time_field(request, "end_time"),
            usage_convert.bucket_seconds(request.bucket),
        )
        return usage_convert.report(report)

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
        _check_output_only_source(request.memory)
        created = await self.app.memories.create(
            convert.memory_values(request.memory),
            request.request_id,
            on_existing=trailers.reporter(context, trailers.EXISTING),
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
        scope = convert.memory_scope(request.scope)
        page = await self.app.memories.list_visible(
            scope, request.kind, request.page_size, request.page_token
        )
        items, token = pages.fitted(page, convert.memory, self.max_bytes)
        if not items and not request.page_token:
            why = await self.app.empty_answers.listed(scope, request.kind)
            trailers.add(context, trailers.EMPTY_REASON, str(why))
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
            request.id,
            request.user_id,
            request.session_id,
            _changed_by(),
            erase_history=request.erase_history,
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
        items, token = pages.fitted(page, convert.memory_revision, self.max_bytes)
        return memory_pb2.ListMemoryHistoryResponse(revisions=items, next_page_token=token)

    async def SearchMemories(
        self, request: memory_pb2.SearchMemoriesRequest, context: Ctx
    ) -> AsyncIterator[memory_pb2.MemoryHit]:
        scope = convert.memory_scope(request.scope)
        mode = convert.search_mode(request.mode)
        found = 0
        async for hit in self.app.memory_search.search(
            request.query,
            scope,
            request.limit,
            mode,
            on_degraded=trailers.reporter(context, trailers.DEGRADED),
            rerank=not request.skip_rerank,
            explain=request.explain,
        ):
            found += 1
            yield convert.memory_hit(hit)
        if not found:
            why = await self.app.empty_answers.memory_search(scope, mode)
            trailers.add(context, trailers.EMPTY_REASON, str(why))

    async def SelectMemories(
        self, request: memory_pb2.SelectMemoriesRequest, context: Ctx
    ) -> AsyncIterator[memory_pb2.SelectedMemory]:
        scope = convert.memory_scope(request.scope)
        said: list[str] = []

        def empty(reason: str) -> None:
            said.append(reason)
            trailers.add(context, trailers.EMPTY_REASON, reason)

        found = 0
        async for selected in self.app.selector.select(
            request.prompt,
            scope,
            request.thread_id,
            request.thread_summary,
            request.limit,
            request.request_id,
            # Sent whatever comes: an empty stream has no message to carry it.
            on_method=trailers.reporter(context, trailers.SELECTION_METHOD),
            on_empty=empty,
            on_degraded=trailers.reporter(context, trailers.DEGRADED),
        ):
            found += 1
            yield convert.selected_memory(selected)
        if not found and not said:
            why = await self.app.empty_answers.memories(scope)
            trailers.add(context, trailers.EMPTY_REASON, str(why))

    async def ListMemoryUsage(
        self, request: memory_pb2.ListMemoryUsageRequest, context: Ctx
    ) -> memory_pb2.ListMemoryUsageResponse:
        # Neither key: the whole of this user's usage in the project.
        key = request.WhichOneof("key")
        page = await self.app.memories.usage(
            request.thread_id if key == "thread_id" else None,
            request.memory_id if key == "memory_id" else None,
            request.user_id,
            request.project_id,
            request.page_size,
            request.page_token,
        )
        items, token = pages.fitted(page, convert.memory_usage, self.max_bytes)
        return memory_pb2.ListMemoryUsageResponse(usage=items, next_page_token=token)

    # Forgetting (docs/privacy.md)

    async def ForgetUser(
        self, request: memory_pb2.ForgetUserRequest, context: Ctx
    ) -> memory_pb2.Erasure:
        erasure = await self.erasures.forget_user(
            request.user_id, request.project_id, _changed_by().principal
        )
        return erasure_convert.erasure(erasure)

    async def GetErasure(
        self, request: memory_pb2.GetErasureRequest, context: Ctx
    ) -> memory_pb2.Erasure:
        return erasure_convert.erasure(await self.erasures.get(request.id))

    async def WatchErasure(
        self, request: memory_pb2.WatchErasureRequest, context: Ctx
    ) -> AsyncIterator[memory_pb2.Erasure]:
        async for erasure in self.erasures.watch(request.id):
            yield erasure_convert.erasure(erasure)

    async def ListErasures(
        self, request: memory_pb2.ListErasuresRequest, context: Ctx
    ) -> memory_pb2.ListErasuresResponse:
        page = await self.erasures.list_receipts(
            request.page_size, request.page_token, request.tenant, request.user_id
        )
        return memory_pb2.ListErasuresResponse(
            erasures=[erasure_convert.erasure(e) for e in page.items],
            next_page_token=page.next_token,
        )

    async def ExportUser(
        self, request: memory_pb2.ExportUserRequest, context: Ctx
    ) -> AsyncIterator[memory_pb2.ExportRecord]:
        async for item in self.app.user_export.records(request.user_id, request.project_id):
            yield _export_record(item)


#: An item error's message is cut to this, so 10,000 failed items still fit
#: in one answer under the default --max-message-bytes.
MAX_ITEM_ERROR_CHARS = 240


def _import_item(request: object) -> EpisodeInput | NexusError:
    """One streamed item as the domain's input, or its error."""
    if isinstance(request, Undecodable):
        return InvalidArgument(request.message)
    assert isinstance(request, memory_pb2.ImportEpisodesRequest)
    if not request.HasField("episode"):
        return InvalidArgument(
            "episode is required in every ImportEpisodesRequest", field="episode"
        )
    e = request.episode
    try:
        return EpisodeInput(
            e.session_id,
            e.user_message,
            e.ai_response,
            convert.from_struct(e.metadata),
            e.request_id,
            e.project_id,
            convert.time_field(e, "occur_time"),
        )
    except NexusError as exc:
        return exc


def _import_answer(
    outcomes: list[tuple[EpisodeInput | NexusError, Imported | NexusError]],
) -> memory_pb2.ImportEpisodesResponse:
    answer = memory_pb2.ImportEpisodesResponse(received=len(outcomes))
    for index, (item, outcome) in enumerate(outcomes):
        if isinstance(outcome, Imported):
            answer.episode_ids.append(outcome.episode_id)
            if outcome.replayed:
                answer.replayed += 1
            else:
                answer.created += 1
            continue
        answer.episode_ids.append(0)
        answer.failed += 1
        answer.errors.append(
            memory_pb2.ImportEpisodeError(
                index=index,
                request_id=item.request_id if isinstance(item, EpisodeInput) else "",
                code=status_code(outcome).value[0],
                message=outcome.message[:MAX_ITEM_ERROR_CHARS],
            )
        )
    return answer


def _export_record(item: UserExportItem) -> memory_pb2.ExportRecord:
    if isinstance(item, Project):
        project = convert.project(item)
        # The file describes the project, not where it sat on this server:
        # an import or restore puts it in the importing key's tenant.
        project.ClearField("tenant")
        return memory_pb2.ExportRecord(project=project)
    if isinstance(item, Session):
        return memory_pb2.ExportRecord(session=convert.session(item))
    if isinstance(item, Episode):
        return memory_pb2.ExportRecord(episode=convert.episode(item))
    if isinstance(item, Memory):
        return memory_pb2.ExportRecord(memory=convert.memory(item))
    if isinstance(item, Revision):
        return memory_pb2.ExportRecord(memory_revision=convert.memory_revision(item))
    if isinstance(item, Entity):
        return memory_pb2.ExportRecord(entity=graph_convert.entity(item))
    if isinstance(item, Relationship):
        return memory_pb2.ExportRecord(relationship=graph_convert.relationship(item))
    if isinstance(item, EntityAlias):
        return memory_pb2.ExportRecord(entity_alias=graph_convert.alias(item))
    if isinstance(item, EntityEpisode):
        return memory_pb2.ExportRecord(
            entity_episode=graph_pb2.EntityEpisode(
                entity_id=item.entity_id, episode_id=item.episode_id
            )
        )
    if isinstance(item, Evidence):
        return memory_pb2.ExportRecord(relationship_evidence=graph_convert.evidence(item))
    if isinstance(item, EntityMerge):
        return memory_pb2.ExportRecord(entity_merge=graph_convert.merge(item, with_sources=True))
    if isinstance(item, MemoryUsage):
        return memory_pb2.ExportRecord(memory_usage=convert.memory_usage(item))
    return memory_pb2.ExportRecord(summary=summary_convert.summary(item))


def _changed_by() -> ChangedBy:
    """Who is making this change, for the memory's history."""
    principal = current_principal()
    rid = request_id_var.get()
    return ChangedBy(
        request_id="" if rid == "-" else rid, principal=principal.name if principal else ""
    )


def _still_wanted(context: Ctx, left: str = "its unfinished batch was not written") -> None:
    """Raises when the caller is gone. grpc ends the request stream of a call
    that was cancelled or ran out of time just as if the client had finished
    it, so without this check an import cut off mid-batch would write the
    unfinished batch after its caller had given up (and had been told so)."""
    remaining = context.time_remaining()
    if remaining is not None and remaining <= 0:
        raise DeadlineExceeded(f"the call ran out of time; {left}")
    if context.cancelled():
        raise Unavailable(f"the call was cancelled; {left}")


def _check_output_only_source(m: memory_pb2.Memory) -> None:
    """``source`` and ``source_episode_id`` are output only: a memory read and
    sent back as it is may carry them (they are ignored), but a value no
    memory can have is refused rather than ignored."""
    if m.source_episode_id < 0:
        raise InvalidArgument(
            "memory.source_episode_id is output only and never negative, got"
            f" {m.source_episode_id}; leave it unset",
            field="memory.source_episode_id",
        )
    if m.source not in memory_pb2.MemorySource.values():
        raise InvalidArgument(
            f"memory.source is output only and {m.source} is no MemorySource; leave it unset",
            field="memory.source",
        )
