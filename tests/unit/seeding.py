"""Rows a unit test starts from, made on the fakes of tests/fakes.py: a project
with a session in it, and an episode of a session. Not a test module: the
summary and graph unit tests (tests/unit/test_summary_rules.py,
test_summary_passes.py, test_graph_empty_reasons.py) each wrote these out
alike; here they are one copy."""

from __future__ import annotations

from nexus_grpc.core.models import Episode
from nexus_grpc.core.tenancy import DEFAULT_TENANT
from tests.fakes import FakeUnitOfWork


def project_session(
    uow: FakeUnitOfWork, name: str | None = None, tenant: str = DEFAULT_TENANT
) -> tuple[int, int]:
    """A project of ``tenant`` (named ``name``, else the next ``p<n>``) and a
    session in it: (project id, session id)."""
    name = name or f"p{len(uow.projects.rows)}"
    project = uow.projects.insert({"name": name}, tenant)
    return project.id, uow.sessions.insert(f"ext-{name}", "", project.id, {}, tenant).id


def episode(uow: FakeUnitOfWork, session_id: int, user: str = "hi", ai: str = "hello") -> Episode:
    """An episode of ``session_id``, stored now."""
    return uow.episodes.insert(session_id, user, ai, {}, None)
