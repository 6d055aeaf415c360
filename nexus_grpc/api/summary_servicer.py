"""nexus.summary.v1.SummaryService."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from nexus_grpc.api import pages
from nexus_grpc.api import summary_convert as convert
from nexus_grpc.app import App
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as spb
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2_grpc as sgrpc

Ctx: TypeAlias = grpc.aio.ServicerContext


class SummaryServicer(sgrpc.SummaryServiceServicer):
    def __init__(self, app: App) -> None:
        self.summaries = app.summaries
        self.max_bytes = app.settings.max_message_bytes

    async def CreateSummary(self, request: spb.CreateSummaryRequest, context: Ctx) -> spb.Summary:
        s = request.summary
        created = await self.summaries.create(
            s.session_id, s.project_id, s.content, convert.range_values(s)
        )
        return convert.summary(created)

    async def GetSummary(self, request: spb.GetSummaryRequest, context: Ctx) -> spb.Summary:
        return convert.summary(await self.summaries.get(request.id))

    async def UpdateSummary(self, request: spb.UpdateSummaryRequest, context: Ctx) -> spb.Summary:
        updated = await self.summaries.update(
            request.summary.id, request.summary.content, list(request.update_mask.paths)
        )
        return convert.summary(updated)

    async def DeleteSummary(
        self, request: spb.DeleteSummaryRequest, context: Ctx
    ) -> spb.DeleteSummaryResponse:
        await self.summaries.delete(request.id)
        return spb.DeleteSummaryResponse()

    async def ListSummaries(
        self, request: spb.ListSummariesRequest, context: Ctx
    ) -> spb.ListSummariesResponse:
        if request.WhichOneof("scope") is None:
            raise InvalidArgument("one of session_id or project_id is required")
        page = await self.summaries.list(
            request.session_id, request.project_id, request.page_size, request.page_token
        )
        items, token = pages.fitted(page, convert.summary, self.max_bytes)
        return spb.ListSummariesResponse(summaries=items, next_page_token=token)

    async def SummarizeSession(
        self, request: spb.SummarizeSessionRequest, context: Ctx
    ) -> spb.Summary:
        return convert.summary(await self.summaries.summarize_session(request.session_id))

    async def SummarizeProject(
        self, request: spb.SummarizeProjectRequest, context: Ctx
    ) -> AsyncIterator[spb.SummarizeProjectResponse]:
        async for part in self.summaries.summarize_project(request.project_id):
            if part.summary is not None:
                yield spb.SummarizeProjectResponse(
                    summary=convert.summary(part.summary), passes=part.passes
                )
            else:
                yield spb.SummarizeProjectResponse(text_delta=part.text)

    async def GetProjectOverview(
        self, request: spb.GetProjectOverviewRequest, context: Ctx
    ) -> spb.GetProjectOverviewResponse:
        overview = await self.summaries.get_overview(request.project_id)
        if overview is None:
            return spb.GetProjectOverviewResponse()
        return spb.GetProjectOverviewResponse(overview=convert.summary(overview))
