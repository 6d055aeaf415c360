"""Guards found by a mutation audit of the unit tier: rules of
domain/budgets.py that no unit test held.

The rest of the budget rules are tests/unit/test_budgets.py's."""

from __future__ import annotations

import time

from nexus_grpc.core import jobs
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.llm_usage import LLMCall
from nexus_grpc.domain.budgets import BudgetPolicy, Budgets
from tests.fakes import FakeDatabase, FakeUnitOfWork


def test_a_per_user_share_alone_is_a_budget():
    assert BudgetPolicy(0, {}, {"t": 100}).any
    assert not BudgetPolicy(0, {}, {"t": 0}).any


async def test_with_only_a_per_user_share_the_gate_still_holds_that_users_jobs():
    """The workers' gate reads nothing when no budget is set: a keys file
    that sets only ``llm_tokens_per_day_per_user`` must still hold a user
    past their share."""
    uow = FakeUnitOfWork()
    session = uow.sessions.insert("s", "", 0, {}, "t", "alice")
    episode = uow.episodes.insert(session.id, "hi", "", {}, None).id
    uow.jobs.enqueue(jobs.EXTRACT_EPISODE, [episode])
    uow.usage.insert(
        [LLMCall("extraction", 0, "t", 100, 0, 1.0, "ok", time.time(), user_id="alice")]
    )
    gate = Budgets(FakeDatabase(uow), BudgetPolicy(0, {}, {"t": 100}))
    held = await gate.hold(jobs.EXTRACT_EPISODE, [Job(1, jobs.EXTRACT_EPISODE, episode, 0)])
    assert list(held) == [1]
    assert "user 'alice' of tenant 't' has spent their share" in str(held[1])
