"""nexus.summary.v1.SummaryService."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from nexus_grpc.api import pages
from nexus_grpc.api import summary_convert as convert
from nexus_grpc.app import App
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2_grpc as summary_grpc

Ctx: TypeAlias = grpc.aio.ServicerContext


class SummaryServicer(summary_grpc.SummaryServiceServicer):
    def __init__(self, app: App) -> None:
        self.summaries = app.summaries
        self.max_bytes = app.settings.max_message_bytes

    async def CreateSummary(
        self, request: summary_pb2.CreateSummaryRequest, context: Ctx
    ) -> summary_pb2.Summary:
        s = request.summary
        created = await self.summaries.create(
            s.session_id, s.project_id, s.content, convert.range_values(s)
        )
        return convert.summary(created)

    async def GetSummary(
        self, request: summary_pb2.GetSummaryRequest, context: Ctx
    ) -> summary_pb2.Summary:
        return convert.summary(await self.summaries.get(request.id))

    async def UpdateSummary(
        self, request: summary_pb2.UpdateSummaryRequest, context: Ctx
    ) -> summary_pb2.Summary:
        updated = await self.summaries.update(
            request.summary.id, request.summary.content, list(request.update_mask.paths)
        )
        return convert.summary(updated)

    async def DeleteSummary(
        self, request: summary_pb2.DeleteSummaryRequest, context: Ctx
    ) -> summary_pb2.DeleteSummaryResponse:
        await self.summaries.delete(request.id)
        return summary_pb2.DeleteSummaryResponse()

    async def ListSummaries(
        self, request: summary_pb2.ListSummariesRequest, context: Ctx
    ) -> summary_pb2.ListSummariesResponse:
        if request.WhichOneof("scope") is None:
            raise InvalidArgument(
                "one of session_id or project_id is required",
                fields=("session_id", "project_id"),
            )
        page = await self.summaries.list(
            request.session_id, request.project_id, request.page_size, request.page_token
        )
        items, token = pages.fitted(page, convert.summary, self.max_bytes)
        return summary_pb2.ListSummariesResponse(summaries=items, next_page_token=token)

    async def SummarizeSession(
        self, request: summary_pb2.SummarizeSessionRequest, context: Ctx
    ) -> summary_pb2.Summary:
        return convert.summary(await self.summaries.summarize_session(request.session_id))

    async def SummarizeProject(
        self, request: summary_pb2.SummarizeProjectRequest, context: Ctx
    ) -> AsyncIterator[summary_pb2.SummarizeProjectResponse]:
        async for part in self.summaries.summarize_project(request.project_id):
            if part.summary is not None:
                yield summary_pb2.SummarizeProjectResponse(
                    summary=convert.summary(part.summary), passes=part.passes
                )
            else:
                yield summary_pb2.SummarizeProjectResponse(text_delta=part.text)

    async def GetProjectOverview(
        self, request: summary_pb2.GetProjectOverviewRequest, context: Ctx
    ) -> summary_pb2.GetProjectOverviewResponse:
        overview = await self.summaries.get_overview(request.project_id)
        if overview is None:
            return summary_pb2.GetProjectOverviewResponse()
        return summary_pb2.GetProjectOverviewResponse(overview=convert.summary(overview))
