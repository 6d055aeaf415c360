"""When a project's retention sweep becomes due (domain/retention.py), decided
by the domain on the fakes of tests/fakes.py: a project given a retention,
and a session moved into a project that has one, make it due at once."""

from __future__ import annotations

from nexus_grpc.core import jobs
from nexus_grpc.domain import retention
from tests.fakes import FakeUnitOfWork


def sweeps(uow: FakeUnitOfWork) -> list[tuple[int, float]]:
    return [
        (j.target_id, j.run_after)
        for j in uow.jobs.rows
        if j.kind == jobs.RETAIN_PROJECT and j.state == "pending"
    ]


def test_a_session_moved_into_a_retained_project_makes_its_sweep_due_then():
    uow = FakeUnitOfWork()
    kept = uow.projects.insert({"name": "kept", "retention": 3600.0})
    plain = uow.projects.insert({"name": "plain"})
    retention.session_moved(uow, kept.id, 100.0)
    retention.session_moved(uow, plain.id, 100.0)  # keeps everything: no sweep
    retention.session_moved(uow, 0, 100.0)  # left its project: no sweep
    assert sweeps(uow) == [(kept.id, 100.0)]


def test_a_sweep_made_due_moves_one_waiting_for_later_forward():
    """A project's last sweep scheduled its next up to an hour ahead; a new
    retention (or a session moved in) must not wait for it."""
    uow = FakeUnitOfWork()
    kept = uow.projects.insert({"name": "kept", "retention": 3600.0})
    uow.jobs.enqueue(jobs.RETAIN_PROJECT, [kept.id], run_after=3700.0)
    retention.start(uow, kept.id, 100.0)
    assert sweeps(uow) == [(kept.id, 100.0)]
