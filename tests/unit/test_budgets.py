"""A tenant's daily LLM token budget (domain/budgets.py): the day it counts,
what is spent against it, and which jobs of a batch it holds back."""

from __future__ import annotations

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.llm_usage import LLMCall
from nexus_grpc.domain import budgets
from nexus_grpc.domain.budgets import BudgetPolicy, TenantSpend
from tests.fakes import FakeUnitOfWork

DAY = 86_400.0
NOON = 20_000 * DAY + DAY / 2  # 2024-10-04T12:00:00Z


def _spend(uow: FakeUnitOfWork, tenant: str, at: float, tokens: int) -> None:
    uow.usage.insert([LLMCall("extraction", 0, tenant, tokens, 0, 1.0, "ok", at)])


def test_the_day_is_the_utc_day_and_resets_at_midnight():
    assert budgets.day_start(NOON) == 20_000 * DAY
    assert budgets.next_day(NOON) == 20_001 * DAY
    assert budgets.next_day(20_000 * DAY) == 20_001 * DAY  # midnight itself starts a day
    assert budgets.iso(budgets.next_day(NOON)) == "2024-10-05T00:00:00Z"


def test_a_tenant_of_its_own_overrides_the_default_and_zero_is_no_budget():
    policy = BudgetPolicy(1000, {"big": 5000, "free": 0})
    assert (policy.limit("big"), policy.limit("free"), policy.limit("other")) == (5000, 0, 1000)
    assert policy.any
    assert not BudgetPolicy(0, {"free": 0}).any
    assert BudgetPolicy(0, {"big": 1}).any


def test_only_today_counts_against_the_budget():
    uow = FakeUnitOfWork()
    _spend(uow, "a", NOON - DAY, 900)  # yesterday
    _spend(uow, "a", budgets.day_start(NOON), 600)  # at midnight: today
    _spend(uow, "b", NOON, 50)
    found = budgets.spend_of(uow, ["a", "b", "c"], BudgetPolicy(1000, {"b": 40}), NOON)
    assert found["a"] == TenantSpend("a", 600, 1000, budgets.next_day(NOON))
    assert not found["a"].exhausted
    assert found["b"].exhausted  # at or past the budget
    assert found["c"].spent == 0 and not found["c"].exhausted


@pytest.mark.parametrize(("spent", "limit", "exhausted"), [(999, 1000, False), (1000, 1000, True),
                                                            (5, 0, False)])  # fmt: skip
def test_a_budget_is_spent_once_the_spend_reaches_it(spent, limit, exhausted):
    assert TenantSpend("t", spent, limit, 0.0).exhausted is exhausted


def test_only_the_jobs_of_a_tenant_past_its_budget_are_held_until_the_next_day():
    uow = FakeUnitOfWork()
    a = uow.sessions.insert("a", "", 0, {}, "a")
    b = uow.sessions.insert("b", "", 0, {}, "b")
    episodes = [uow.episodes.insert(s.id, "hi", "", {}, None).id for s in (a, a, b)]
    uow.jobs.enqueue(jobs.EXTRACT_EPISODE, episodes, run_after=NOON)
    _spend(uow, "a", NOON, 1000)
    policy = BudgetPolicy(1000)
    batch = [Job(10 + i, jobs.EXTRACT_EPISODE, e, 0) for i, e in enumerate(episodes)]
    owners = uow.usage.job_owners(jobs.EXTRACT_EPISODE, episodes)
    spends = budgets.spend_of(uow, {o.tenant for o in owners.values()}, policy, NOON)

    held = budgets.held(jobs.EXTRACT_EPISODE, batch, owners, spends)

    assert sorted(held) == [10, 11]  # tenant a's two; b's runs
    deferral = held[10]
    assert deferral.until == budgets.next_day(NOON)
    assert str(deferral).startswith("extraction waits: tenant 'a' has spent its LLM token budget")
    assert "1,000 of 1,000 tokens" in str(deferral)
    assert "2024-10-05T00:00:00Z" in str(deferral)
    # The sweep moves a's backlog of that kind, not b's.
    assert deferral.sweep is not None
    moved = deferral.sweep(uow)
    assert sorted(j.target_id for j in moved) == episodes[:2]
    waiting = {j.target_id: j.run_after for j in uow.jobs.rows}
    assert waiting[episodes[0]] == waiting[episodes[1]] == budgets.next_day(NOON)
    assert waiting[episodes[2]] < NOON + DAY


def test_a_job_whose_target_is_gone_is_not_held():
    held = budgets.held(
        jobs.EXTRACT_EPISODE,
        [Job(1, jobs.EXTRACT_EPISODE, 99, 0)],
        {},
        {"a": TenantSpend("a", 10, 1, 0.0)},
    )
    assert held == {}
