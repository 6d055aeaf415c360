"""Which sessions a search may see: the project isolation rule (a project's sessions share its
memory, a session outside any project keeps its own), resolved per call.

| session                  | scope                                   |
| no project               | its own episodes                        |
| in a project             | every episode of every project session  |
| removed from a project   | its own, from the next call on          |

Membership is read at query time (not stored in vector payloads), so adding
or removing a session takes effect on the very next call, for pre-existing
episodes too.  The caller's tenant is checked here too: a session or project
of another tenant resolves exactly as a missing one does, so every search
mode (keyword, semantic, hybrid) is confined before any ranking runs.
"""

from __future__ import annotations

from nexus_grpc.core import tenancy
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain import validation as v
from nexus_grpc.errors import FailedPrecondition, InvalidArgument, NotFound


def episode_scope(uow: UnitOfWork, session_id: int, project_id: int) -> list[int]:
    v.positive_id("session_id", session_id, required=False)
    v.positive_id("project_id", project_id, required=False)
    tenant = tenancy.visible()
    if session_id:
        session = uow.sessions.get(session_id, tenant)
        if project_id and session.project_id != project_id:
            raise InvalidArgument(
                f"session {session_id} is not in project_id {project_id}; give one or the other",
                fields=("session_id", "project_id"),
            )
        if session.project_id:
            return uow.sessions.project_session_ids(session.project_id)
        return [session.id]
    if project_id:
        if not uow.projects.exists(project_id, tenant):
            raise NotFound(
                f"project {project_id} does not exist",
                resource_type="project",
                resource_name=project_id,
            )
        return uow.sessions.project_session_ids(project_id)
    raise InvalidArgument(
        "session_id or project_id is required to scope a search",
        fields=("session_id", "project_id"),
    )


def check_session_graph(uow: UnitOfWork, session_id: int) -> None:
    """A session's own graph exists only while the session is outside any project."""
    # NotFound when it does not exist, or is another tenant's.
    session = uow.sessions.get(session_id, tenancy.visible())
    if session.project_id:
        raise FailedPrecondition(
            f"session {session_id} is in project {session.project_id}, whose graph its"
            f" episodes share: use project_id {session.project_id}"
        )
