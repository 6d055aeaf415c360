"""GetUsage's report (domain/usage_report.UsageReports), on the fakes of
tests/fakes.py: a key reads its tenant's (or one of its projects') calls and
budget, nothing of another tenant (only an admin names one), and what the
LLM work was for (episodes stored, memories formed, entities made) counted
in the same scope, a user key's limited to its users' work.

The calls are tests/e2e/api/test_get_usage.py's; that file keeps the wiring
(a report as the client reads it, and a bad field refused). The window's
checks and buckets are tests/unit/test_usage_report.py's. The calls both files
seed, and tenant a's totals, are tests/usage_calls.py's.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import MemoryKind, NewEpisode, Tier
from nexus_grpc.core.records import Memory
from nexus_grpc.domain.budgets import BudgetPolicy, Budgets
from nexus_grpc.domain.usage_report import DAY, UsageReport, UsageReports
from nexus_grpc.errors import NotFound, PermissionDenied
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.callers import acting_as
from tests.usage_calls import A_TOKENS_TODAY, a_reads_its_tenant_and_project, usage_calls

A = tenancy.Caller("a")
ADMIN = tenancy.Caller("ops", all_tenants=True)


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


def _seed(uow: FakeUnitOfWork) -> tuple[int, int]:
    """A project of each tenant, and the calls they made (today, so they count
    against the budgets too)."""
    pa = uow.projects.insert({"name": "pa"}, "a").id
    pb = uow.projects.insert({"name": "pb"}, "b").id
    uow.usage.insert(usage_calls(pa, pb))
    return pa, pb


async def usage(uow: FakeUnitOfWork, caller: tenancy.Caller, **kw: Any) -> UsageReport:
    db = FakeDatabase(uow)
    request = {"project_id": 0, "tenant": "", "start": None, "end": None, "bucket_seconds": DAY}
    reports = UsageReports(db, Budgets(db, BudgetPolicy(0, {"b": 5000})), "default")
    with acting_as(caller):
        return await reports.get(**{**request, **kw})


def _totals(report: UsageReport) -> dict[str, tuple]:
    return {
        s.stage: (s.calls, s.prompt_tokens, s.completion_tokens, s.outcomes)
        for s in report.total.stages
    }


async def test_a_key_reads_its_tenant_or_one_of_its_projects(uow):
    pa, _ = _seed(uow)
    tenant = await a_reads_its_tenant_and_project(lambda **kw: usage(uow, A, **kw), _totals, pa)
    # Its budget: none of its own, and no default.
    assert tenant.budget.tenant == "a" and tenant.budget.limit == 0
    assert tenant.budget.spent == A_TOKENS_TODAY and not tenant.budget.exhausted


async def test_another_tenants_project_answers_as_a_missing_one(uow):
    _, pb = _seed(uow)
    with pytest.raises(NotFound) as missing:
        await usage(uow, A, project_id=999_999)
    with pytest.raises(NotFound) as theirs:
        await usage(uow, A, project_id=pb)
    assert theirs.value.message.replace(str(pb), "N") == missing.value.message.replace(
        "999999", "N"
    )


async def test_only_an_admin_names_another_tenant_and_reads_any(uow):
    _, pb = _seed(uow)
    with pytest.raises(PermissionDenied) as denied:
        await usage(uow, A, tenant="b")
    assert "only an admin key may name another tenant" in denied.value.message
    # An admin reads any tenant, by name or by project.
    b = await usage(uow, ADMIN, tenant="b")
    assert b.tenant == "b" and _totals(b) == {"extraction": (1, 7000, 700, {"ok": 1})}
    assert b.budget.limit == 5000 and b.budget.exhausted
    assert _totals(await usage(uow, ADMIN, project_id=pb)) == _totals(b)
    # Its own tenant (named "ops") spent nothing.
    assert _totals(await usage(uow, ADMIN)) == {}
    # A tenant nobody has used reads as nothing, not as an error.
    assert _totals(await usage(uow, ADMIN, tenant="nobody")) == {}


def _work(uow: FakeUnitOfWork, pa: int, at: float) -> None:
    """In project pa: alice's episode and bob's, a USER memory formed for
    alice and a PROJECT one formed from bob's episode, one a client wrote,
    and an entity alice's episode mentions; tenant b's episode."""
    alice = uow.sessions.insert("alice", "", pa, {}, "a", user_id="alice").id
    bob = uow.sessions.insert("bob", "", pa, {}, "a", user_id="bob").id
    theirs = uow.sessions.insert("theirs", "", 0, {}, "b").id
    said_alice, said_bob, _ = uow.episodes.insert_many(
        [NewEpisode(s, "x", "", {}, None, created_at=at) for s in (alice, bob, theirs)]
    )
    for kind, user, source, episode in (
        (MemoryKind.USER, "alice", "formation", said_alice),
        (MemoryKind.PROJECT, "", "formation", said_bob),
        (MemoryKind.USER, "alice", "client", None),
    ):
        uow.restore.insert_memory(
            Memory(0, int(kind), "t", "c", int(Tier.LONGTERM), pa, user_id=user, created_at=at,
                   updated_at=at, source=source, source_episode_id=episode),
            "a",
        )  # fmt: skip
    uow.graph.insert_entity((pa, 0), "Ann", "person", None, source="extraction",
                            episode_id=said_alice)  # fmt: skip


async def test_the_work_the_calls_were_for_is_counted_in_the_reports_scope(uow):
    pa, _ = _seed(uow)
    _work(uow, pa, time.time() - 60)
    tenant, project = await usage(uow, A), await usage(uow, A, project_id=pa)
    for report in (tenant, project):
        assert (report.total.episodes, report.total.memories_formed, report.total.entities) == (
            2, 2, 1)  # fmt: skip
    assert sum(p.episodes for p in tenant.buckets) == 2
    b = await usage(uow, ADMIN, tenant="b")
    assert (b.total.episodes, b.total.memories_formed, b.total.entities) == (1, 0, 0)


async def test_a_user_keys_report_counts_only_the_work_for_its_users(uow):
    pa, _ = _seed(uow)
    _work(uow, pa, time.time() - 60)
    bobs = await usage(uow, tenancy.Caller("a", frozenset({"bob"})))
    assert bobs.users == ("bob",)
    # bob's episode and the PROJECT memory formed from it; alice's entity is not his.
    assert (bobs.total.episodes, bobs.total.memories_formed, bobs.total.entities) == (1, 1, 0)
    alices = await usage(uow, tenancy.Caller("a", frozenset({"alice"})), project_id=pa)
    assert (alices.total.episodes, alices.total.memories_formed, alices.total.entities) == (
        1, 1, 1)  # fmt: skip
