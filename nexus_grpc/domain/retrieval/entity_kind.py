"""Entities (SearchEntities): one graph per search, a project's or (for a
session outside any project) the session's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nexus_grpc.core import documents, tenancy
from nexus_grpc.core.graph import Entity
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.episode_scope import check_session_graph
from nexus_grpc.domain.retrieval.hits import EntityHit
from nexus_grpc.domain.retrieval.pipeline import Engine
from nexus_grpc.errors import InvalidArgument, NotFound


@dataclass(frozen=True)
class GraphRequest:
    project_id: int = 0
    session_id: int = 0


class Entities:
    async def open(self, engine: Engine[Any], call: Call) -> bool:
        request: GraphRequest = call.request
        project_id, session_id = request.project_id, request.session_id
        v.positive_id("project_id", project_id, required=False)
        v.positive_id("session_id", session_id, required=False)
        if bool(project_id) == bool(session_id):
            raise InvalidArgument(
                "an entity search needs exactly one graph: project_id, or session_id for a"
                f" session outside any project (got project_id {project_id},"
                f" session_id {session_id})"
            )
        tenant = tenancy.visible()
        if project_id:
            if not await engine.db.read(lambda c: c.projects.exists(project_id, tenant)):
                raise NotFound(
                    f"project {project_id} does not exist",
                    resource_type="project",
                    resource_name=project_id,
                )
        else:
            await engine.db.read(lambda c: check_session_graph(c, session_id))
        call.scope = (project_id, session_id)
        return True

    def document(self, row: Entity) -> str:
        return documents.entity_text(row.name, row.type, row.notes, row.aliases)

    def hit(self, candidate: Candidate, call: Call) -> EntityHit:
        return EntityHit(
            candidate.row,
            candidate.score,
            degraded_reason=call.degraded_reason,
            reranked=candidate.reranked,
        )


# Filters (filters.py): the last word on each row, before the page.


def in_graph(row: Entity, call: Call) -> bool:
    return (row.project_id, row.session_id) == call.scope
