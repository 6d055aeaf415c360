"""Where a hook reads and writes: the project found by name, the session by the
agent's own session id.

The project is the one called ``--project`` in the key's own tenant, as
``nexus-grpc mcp`` finds it (``client/name_lookup.py``; done here over the
light channel), remembered between runs (``project_cache.py``). Reads never
create anything: before a session's first exchange there is simply nothing to
recall. The stop event creates the project and the session on first use.
"""

from __future__ import annotations

import grpc

from nexus_grpc.agent_hooks.deadline import Deadline
from nexus_grpc.agent_hooks.project_cache import ProjectCache
from nexus_grpc.agent_hooks.wire import Wire, pb
from nexus_grpc.session_names import session_external_id

__all__ = ["GONE", "Workspace"]

_PAGE = 1000
SOURCE = "nexus-grpc hooks"
#: What a call answers when the project or session it named is not (or no
#: longer) the caller's: the cached id is forgotten.
GONE = (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED)


class Workspace:
    def __init__(
        self,
        wire: Wire,
        deadline: Deadline,
        *,
        host: str,
        project: str,
        user: str,
        cache: ProjectCache,
    ) -> None:
        self.wire = wire
        self.deadline = deadline
        self.host = host
        self.project = project
        self.user = user
        self.cache = cache

    # The project -------------------------------------------------------------

    def _named(self, tenant: str | None) -> list[int]:
        ids: list[int] = []
        token = ""
        while True:
            page = self.wire.call(
                "ListProjects",
                pb.ListProjectsRequest(page_size=_PAGE, page_token=token),
                self.deadline.left(),
            )
            ids += [
                p.id
                for p in page.projects
                if p.name == self.project and (tenant is None or p.tenant == tenant)
            ]
            token = page.next_page_token
            if not token:
                return sorted(ids)

    def _own_tenant(self) -> str:
        status = self.wire.call(
            "GetServiceStatus", pb.GetServiceStatusRequest(), self.deadline.left()
        )
        return status.tenant

    def project_id(self, *, create: bool) -> int:
        """The project's id; 0 when it does not exist and ``create`` is false."""
        cached = self.cache.get(self.project)
        if cached:
            return cached
        found = self._find() or (self._create() if create else 0)
        if found:
            self.cache.put(self.project, found)
        return found

    def forget_project(self) -> None:
        self.cache.forget(self.project)

    def _find(self) -> int:
        if not self._named(None):
            return 0
        found = self._named(self._own_tenant())
        return found[0] if found else 0

    def _create(self) -> int:
        try:
            created = self.wire.call(
                "CreateProject",
                pb.CreateProjectRequest(
                    project=pb.Project(
                        name=self.project, description=f"created by {SOURCE} on first use"
                    )
                ),
                self.deadline.left(),
            )
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise
            # Two agents' first exchanges at once both found nothing and
            # created: a project's name is unique in its tenant, so the one
            # refused settles on the project the tenant holds by that name.
            found = self._named(self._own_tenant())
            if not found:
                raise
            return found[0]
        return created.id

    # The session -------------------------------------------------------------

    def external_id(self, agent_session: str) -> str:
        return session_external_id(self.project, agent_session)

    def find_session(self, agent_session: str) -> pb.Session | None:
        try:
            return self.wire.call(
                "GetSession",
                pb.GetSessionRequest(external_id=self.external_id(agent_session)),
                self.deadline.left(),
            )
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def open_session(self, agent_session: str, project_id: int) -> pb.Session:
        """The agent's session, created in the project on its first exchange."""
        found = self.find_session(agent_session)
        if found is not None:
            return found
        session = pb.Session(
            external_id=self.external_id(agent_session),
            name=agent_session[:200],
            project_id=project_id,
            user_id=self.user,
        )
        session.metadata.update(
            {"source": SOURCE, "host": self.host, "agent_session_id": agent_session}
        )
        try:
            return self.wire.call(
                "CreateSession", pb.CreateSessionRequest(session=session), self.deadline.left()
            )
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise
        # Another hook of the same session (a subagent's stop) created it first.
        found = self.find_session(agent_session)
        if found is None:
            raise RuntimeError(f"session {self.external_id(agent_session)} vanished")
        return found
