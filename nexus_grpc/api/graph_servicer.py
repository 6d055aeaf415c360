"""nexus.graph.v1.GraphService."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from nexus_grpc.api import graph_convert as convert
from nexus_grpc.api import pages, trailers
from nexus_grpc.api.convert import time_field
from nexus_grpc.app import App
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.rpc.auth import current_principal

Ctx: TypeAlias = grpc.aio.ServicerContext


class GraphServicer(graph_grpc.GraphServiceServicer):
    def __init__(self, app: App) -> None:
        self.graph = app.graph
        self.entity_search = app.entity_search
        self.merges = app.merges
        self.extraction = app.extraction
        self.empty_answers = app.empty_answers
        self.max_bytes = app.settings.max_message_bytes

    # Entities

    async def UpsertEntity(
        self, request: graph_pb2.UpsertEntityRequest, context: Ctx
    ) -> graph_pb2.Entity:
        e = await self.graph.upsert_entity(
            request.name,
            request.type,
            request.notes,
            request.confidence,
            request.project_id,
            session_id=request.session_id,
        )
        return convert.entity(e)

    async def GetEntity(
        self, request: graph_pb2.GetEntityRequest, context: Ctx
    ) -> graph_pb2.Entity:
        return convert.entity(await self.graph.get_entity(request.id))

    async def DeleteEntity(
        self, request: graph_pb2.DeleteEntityRequest, context: Ctx
    ) -> graph_pb2.DeleteEntityResponse:
        deleted = await self.graph.delete_entity(request.id)
        return graph_pb2.DeleteEntityResponse(deleted_relationships=deleted)

    async def ListEntities(
        self, request: graph_pb2.ListEntitiesRequest, context: Ctx
    ) -> graph_pb2.ListEntitiesResponse:
        page = await self.graph.list_entities(
            request.type,
            request.project_id,
            request.page_size,
            request.page_token,
            session_id=request.session_id,
            name=request.name,
        )
        items, token = pages.fitted(page, convert.entity, self.max_bytes)
        if not items and not request.page_token and not (request.type or request.name):
            why = await self.empty_answers.graph(request.project_id, request.session_id)
            trailers.add(context, trailers.EMPTY_REASON, str(why))
        return graph_pb2.ListEntitiesResponse(entities=items, next_page_token=token)

    # Relationships

    async def UpsertRelationship(
        self, request: graph_pb2.UpsertRelationshipRequest, context: Ctx
    ) -> graph_pb2.Relationship:
        r = await self.graph.upsert_relationship(
            request.from_id,
            request.to_id,
            request.label,
            request.notes,
            time_field(request, "valid_time"),
            time_field(request, "invalid_time"),
        )
        return convert.relationship(r)

    async def ListRelationships(
        self, request: graph_pb2.ListRelationshipsRequest, context: Ctx
    ) -> graph_pb2.ListRelationshipsResponse:
        page = await self.graph.list_relationships(
            request.entity_id,
            request.include_inbound,
            request.page_size,
            request.page_token,
            as_of=time_field(request, "as_of"),
            include_history=request.include_history,
        )
        items, token = pages.fitted(page, convert.relationship, self.max_bytes)
        return graph_pb2.ListRelationshipsResponse(relationships=items, next_page_token=token)

    async def DeleteRelationship(
        self, request: graph_pb2.DeleteRelationshipRequest, context: Ctx
    ) -> graph_pb2.DeleteRelationshipResponse:
        await self.graph.delete_relationship(request.from_id, request.to_id, request.label)
        return graph_pb2.DeleteRelationshipResponse()

    # Traversal and search

    async def GetNeighborhood(
        self, request: graph_pb2.GetNeighborhoodRequest, context: Ctx
    ) -> graph_pb2.Subgraph:
        return convert.subgraph(
            await self.graph.neighborhood(
                request.entity_id,
                request.depth,
                as_of=time_field(request, "as_of"),
                include_history=request.include_history,
            )
        )

    async def GetNeighbors(
        self, request: graph_pb2.GetNeighborsRequest, context: Ctx
    ) -> graph_pb2.Subgraph:
        return convert.subgraph(
            await self.graph.neighbors(
                list(request.entity_ids),
                as_of=time_field(request, "as_of"),
                include_history=request.include_history,
            )
        )

    # Resolution and merges

    async def ListEntityAliases(
        self, request: graph_pb2.ListEntityAliasesRequest, context: Ctx
    ) -> graph_pb2.ListEntityAliasesResponse:
        page = await self.graph.list_aliases(
            request.entity_id, request.page_size, request.page_token
        )
        items, token = pages.fitted(page, convert.alias, self.max_bytes)
        return graph_pb2.ListEntityAliasesResponse(aliases=items, next_page_token=token)

    async def MergeEntities(
        self, request: graph_pb2.MergeEntitiesRequest, context: Ctx
    ) -> graph_pb2.EntityMerge:
        principal = current_principal()
        merge = await self.merges.merge(
            request.target_id,
            list(request.source_ids),
            request.request_id,
            request.reason,
            principal=principal.name if principal is not None else "",
        )
        return convert.merge(merge)

    async def UndoMerge(
        self, request: graph_pb2.UndoMergeRequest, context: Ctx
    ) -> graph_pb2.EntityMerge:
        return convert.merge(await self.merges.undo(request.merge_id))

    async def ListMerges(
        self, request: graph_pb2.ListMergesRequest, context: Ctx
    ) -> graph_pb2.ListMergesResponse:
        page = await self.merges.list(
            request.project_id,
            request.session_id,
            request.entity_id,
            request.page_size,
            request.page_token,
        )
        items, token = pages.fitted(page, convert.merge, self.max_bytes)
        return graph_pb2.ListMergesResponse(merges=items, next_page_token=token)

    async def SearchEntities(
        self, request: graph_pb2.SearchEntitiesRequest, context: Ctx
    ) -> AsyncIterator[graph_pb2.EntityHit]:
        found = 0
        async for hit in self.entity_search.search(
            request.query,
            request.project_id,
            request.limit,
            session_id=request.session_id,
            rerank=not request.skip_rerank,
            explain=request.explain,
        ):
            found += 1
            yield convert.entity_hit(hit)
        if not found:
            why = await self.empty_answers.entities(request.project_id, request.session_id)
            trailers.add(context, trailers.EMPTY_REASON, str(why))

    # Extraction

    async def ExtractEpisode(
        self, request: graph_pb2.ExtractEpisodeRequest, context: Ctx
    ) -> graph_pb2.ExtractEpisodeResponse:
        target = request.WhichOneof("target")
        if target is None:
            raise InvalidArgument(
                "one of episode_id or all_failed is required",
                fields=("episode_id", "all_failed"),
            )
        if target == "all_failed" and not request.all_failed:
            raise InvalidArgument("all_failed must be true when given", field="all_failed")
        queued = await self.extraction.requeue(
            request.episode_id if target == "episode_id" else 0, target == "all_failed"
        )
        return graph_pb2.ExtractEpisodeResponse(queued=queued)

    async def WatchExtractions(
        self, request: graph_pb2.WatchExtractionsRequest, context: Ctx
    ) -> AsyncIterator[graph_pb2.ExtractionEvent]:
        # A watch stream lives as long as its client wants: it holds one of
        # --max-watch-streams (refused with RESOURCE_EXHAUSTED beyond it) as
        # well as one of the general RPC slots.
        # ...and one of --max-watch-streams-per-key for the caller's key, and
        # of --max-watch-streams-per-tenant for its tenant.
        principal = current_principal()
        with self.graph.events.watching(
            principal.key_id if principal is not None else None,
            principal.name if principal is not None else "",
            principal.tenant if principal is not None else None,
        ):
            events = self.graph.watch(
                request.episode_id, request.session_id, request.project_id, request.after_event_id
            )
            try:
                async for event in events:
                    yield convert.extraction_event(event)
            finally:
                # Close it now, not when it is collected: the slot and the
                # page it holds are freed with the stream.
                await events.aclose()
