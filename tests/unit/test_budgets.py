"""A tenant's daily LLM token budget and its users' share of it
(domain/budgets.py): the day it counts, what is spent against it, which
jobs of a batch it holds back, which tenants' lines and what of them a key
is told, the summaries it refuses (domain/summaries.py) without asking the
model, and the held work a raised budget frees.

What a client sees over gRPC (the workers holding the jobs, the status
codes and details, GetServiceStatus, doctor) is
tests/e2e/service/test_llm_budgets.py's."""

from __future__ import annotations

import time

import pytest

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.llm_usage import LLMCall, WorkOwner
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import budgets
from nexus_grpc.domain.budgets import BudgetPolicy, Budgets, TenantSpend
from nexus_grpc.domain.summaries import Summaries
from nexus_grpc.errors import QuotaViolation, ResourceExhausted
from tests.fakes import FakeDatabase, FakeUnitOfWork

DAY = 86_400.0
NOON = 20_000 * DAY + DAY / 2  # 2024-10-04T12:00:00Z


def _spend(uow: FakeUnitOfWork, tenant: str, at: float, tokens: int, user: str = "") -> None:
    uow.usage.insert([LLMCall("extraction", 0, tenant, tokens, 0, 1.0, "ok", at, user_id=user)])


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


def _episodes_of(uow: FakeUnitOfWork, *users: str) -> list[int]:
    """One episode in a session of tenant t for each user named."""
    sessions = {u: uow.sessions.insert(f"s-{u}", "", 0, {}, "t", u) for u in set(users)}
    return [uow.episodes.insert(sessions[u].id, "hi", "", {}, None).id for u in users]


def test_a_user_past_their_share_is_held_and_only_their_work_is_moved():
    uow = FakeUnitOfWork()
    episodes = _episodes_of(uow, "alice", "alice", "carol", "")
    uow.jobs.enqueue(jobs.EXTRACT_EPISODE, episodes, run_after=NOON)
    _spend(uow, "t", NOON, 100, "alice")
    _spend(uow, "t", NOON, 99, "carol")
    _spend(uow, "t", NOON, 5000)  # work for no user: no one's share
    policy = BudgetPolicy(0, {}, {"t": 100})
    batch = [Job(10 + i, jobs.EXTRACT_EPISODE, e, 0) for i, e in enumerate(episodes)]
    owners = uow.usage.job_owners(jobs.EXTRACT_EPISODE, episodes)
    assert set(owners.values()) == {WorkOwner("t", "alice"), WorkOwner("t", "carol"),
                                    WorkOwner("t", "")}  # fmt: skip
    users = budgets.user_spend_of(uow, set(owners.values()), policy, NOON)
    assert set(users) == {WorkOwner("t", "alice"), WorkOwner("t", "carol")}

    held = budgets.held(jobs.EXTRACT_EPISODE, batch, owners, {}, users)

    assert sorted(held) == [10, 11]  # alice's two; carol's and no one's run
    assert str(held[10]).startswith(
        "extraction waits: user 'alice' of tenant 't' has spent their share of the tenant's"
        " LLM tokens for today (100 of 100 tokens, llm-tokens-per-day-per-user)"
    )
    assert held[10].sweep is not None
    moved = held[10].sweep(uow)
    assert sorted(j.target_id for j in moved) == episodes[:2]
    assert {j.target_id for j in uow.jobs.rows if j.run_after > NOON} == set(episodes[:2])


def test_the_tenants_budget_comes_before_its_users_share():
    uow = FakeUnitOfWork()
    [episode] = _episodes_of(uow, "carol")
    _spend(uow, "t", NOON, 1000, "alice")
    policy = BudgetPolicy(0, {"t": 1000}, {"t": 5000})
    owners = uow.usage.job_owners(jobs.EXTRACT_EPISODE, [episode])
    spends = budgets.spend_of(uow, ["t"], policy, NOON)
    users = budgets.user_spend_of(uow, set(owners.values()), policy, NOON)
    held = budgets.held(jobs.EXTRACT_EPISODE, [Job(1, jobs.EXTRACT_EPISODE, episode, 0)],
                        owners, spends, users)  # fmt: skip
    assert "tenant 't' has spent its LLM token budget" in str(held[1])


def test_a_key_that_may_act_only_for_some_users_is_told_only_their_spend():
    uow = FakeUnitOfWork()
    _spend(uow, "t", NOON, 300, "alice")
    _spend(uow, "t", NOON, 40, "carol")
    _spend(uow, "t", NOON, 7)  # an overview: no user's
    policy = BudgetPolicy(0, {"t": 1000}, {"t": 250})
    [line] = budgets.spend_of(uow, ["t"], policy, NOON).values()
    carol = budgets.as_seen(uow, line, frozenset({"carol"}), policy, NOON)
    assert (carol.shown, carol.spent, carol.per_user) == (40, 347, 250)
    assert [(u.user_id, u.spent, u.exhausted) for u in carol.users] == [("carol", 40, False)]
    every = budgets.as_seen(uow, line, None, policy, NOON)
    assert every.shown == 347
    assert [(u.user_id, u.spent, u.exhausted) for u in every.users] == [
        ("alice", 300, True),
        ("carol", 40, False),
    ]


async def test_the_report_follows_the_callers_users():
    uow = FakeUnitOfWork()
    _spend(uow, "t", time.time(), 300, "alice")
    _spend(uow, "t", time.time(), 40, "carol")
    found = Budgets(FakeDatabase(uow), BudgetPolicy(1000))
    token = tenancy.bind(tenancy.Caller("t", frozenset({"carol"})))
    try:
        [line] = await found.report("t")
    finally:
        tenancy.reset(token)
    assert (line.tenant, line.shown, line.spent) == ("t", 40, 340)
    assert [(u.user_id, u.spent) for u in line.users] == [("carol", 40)]
    # A key that may act for every user is told the tenant's whole spend.
    token = tenancy.bind(tenancy.Caller("t", None))
    try:
        [line] = await found.report("t")
    finally:
        tenancy.reset(token)
    assert (line.shown, line.users) == (340, ())


async def test_work_a_budget_held_runs_at_once_when_it_no_longer_holds_it():
    uow = FakeUnitOfWork()
    episodes = _episodes_of(uow, "alice", "carol")
    uow.jobs.enqueue(jobs.EXTRACT_EPISODE, episodes)
    now = time.time()
    _spend(uow, "t", now, 500, "alice")
    reason = TenantSpend("t", 500, 100, budgets.next_day(now), user_id="alice").reason()
    for j in uow.jobs.rows:
        j.run_after, j.last_error = budgets.next_day(now), f"extraction waits: {reason}"
    # One more, waiting for another reason: not a budget's, left alone.
    uow.jobs.enqueue(jobs.SUMMARIZE_SESSION, [1], run_after=now + 60)
    uow.jobs.rows[-1].last_error = "the model is unreachable"
    noted: list[int] = []
    held = Budgets(FakeDatabase(uow), BudgetPolicy(0, {}, {"t": 100}))
    # Alice's share still spent: hers stays; carol's (under hers) runs.
    assert await held.resume(jobs.EXTRACT_EPISODE, lambda u, j, e: noted.append(j.target_id)) == 1
    assert noted == [episodes[1]]
    due = {
        j.target_id: j.run_after <= time.time()
        for j in uow.jobs.rows
        if j.kind == jobs.EXTRACT_EPISODE
    }
    assert due == {episodes[0]: False, episodes[1]: True}
    # The share raised: hers runs too, and says nothing of a budget any more.
    raised = Budgets(FakeDatabase(uow), BudgetPolicy(0, {}, {"t": 10_000}))
    assert await raised.resume(jobs.EXTRACT_EPISODE, None) == 1
    assert all(
        j.run_after <= time.time() and j.last_error == ""
        for j in uow.jobs.rows
        if j.kind == jobs.EXTRACT_EPISODE
    )
    assert await raised.resume(jobs.SUMMARIZE_SESSION, None) == 0


async def test_each_key_is_told_its_own_tenants_spend_and_an_admin_every_tenants():
    """A tenant's key sees its own tenant's line only; a key that sees every
    tenant, each tenant with a budget of its own or a spend today, and its own."""
    uow = FakeUnitOfWork()
    now = time.time()
    _spend(uow, "a", now, 150)  # past a's 100 a day
    _spend(uow, "b", now, 500)
    found = Budgets(FakeDatabase(uow), BudgetPolicy(1_000_000, {"a": 100}))

    async def report(caller: tenancy.Caller) -> dict[str, TenantSpend]:
        token = tenancy.bind(caller)
        try:
            return {line.tenant: line for line in await found.report(caller.tenant)}
        finally:
            tenancy.reset(token)

    mine = await report(tenancy.Caller("a"))
    assert list(mine) == ["a"]
    assert mine["a"].limit == 100 and mine["a"].exhausted
    assert mine["a"].resets_at == budgets.next_day(now)
    theirs = await report(tenancy.Caller("b"))
    assert list(theirs) == ["b"]
    assert theirs["b"].limit == 1_000_000 and not theirs["b"].exhausted
    assert 0 < theirs["b"].shown < 1_000_000
    every = await report(tenancy.Caller("ops", all_tenants=True))
    assert set(every) == {"a", "b", "ops"}
    assert every["a"] == mine["a"] and every["b"] == theirs["b"]
    assert every["ops"].shown == 0


class NoModel:
    """A model that must not be asked: any use of it fails the test."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the model was asked ({name})")


async def test_past_its_budget_a_tenants_summaries_are_refused_without_asking_the_model():
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, "a")
    session = uow.sessions.insert("s", "", project.id, {}, "a")
    uow.episodes.insert(session.id, "The staging database listens on port 5433.", "ok", {}, None)
    _spend(uow, "a", time.time(), 150)
    held = Budgets(FakeDatabase(uow), BudgetPolicy(1_000_000, {"a": 100}))
    summaries = Summaries(FakeDatabase(uow), JobSignals(), NoModel(), "m", budgets=held)  # type: ignore[arg-type]
    token = tenancy.bind(tenancy.Caller("a"))
    try:
        for call in (
            summaries.summarize_session(session.id),
            _drain(summaries.summarize_project(project.id)),
        ):
            with pytest.raises(ResourceExhausted) as refused:
                await call
            assert "tenant 'a' has spent its LLM token budget" in refused.value.message
            [quota] = [d for d in refused.value.details if isinstance(d, QuotaViolation)]
            assert quota.quota_id == budgets.QUOTA_ID == "llm-tokens-per-day"
    finally:
        tenancy.reset(token)
    assert uow.summaries.rows == {} and uow.usage.rows[1:] == []


async def _drain(stream) -> None:
    async for _ in stream:
        pass
