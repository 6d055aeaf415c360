"""The LLM usage ledger's own rules (core/llm_usage.py), without a client:
whose a call is (the ledger's stage, project, tenant and user; a nested
stage; none outside a ledger), what a record keeps (no negative counts), a
ledger reaching the tasks started inside it, calls written leaving it by
identity, a context put back where its token is foreign, and the process's
totals for /metrics.

Each LLM client's account into this ledger is
tests/unit/test_llm_accounting_rules.py's; GetUsage's window and buckets over
what was written, tests/unit/test_usage_report.py's."""

from __future__ import annotations

import asyncio
import contextvars

from nexus_grpc.core import llm_usage


def test_a_call_is_the_ledgers_stage_project_tenant_and_user() -> None:
    with llm_usage.ledger(llm_usage.EXTRACTION, 3, "acme") as ledger:
        first = llm_usage.record(10, 4, 0.5, llm_usage.OK)
        llm_usage.attribute(7, "globex", "ann")
        second = llm_usage.record(12, 5, 0.25, llm_usage.CUT_OFF, estimated=True)
    assert ledger.unwritten() == [first, second]
    assert (first.stage, first.project_id, first.tenant, first.user_id) == (
        "extraction", 3, "acme", "")  # fmt: skip
    assert (second.project_id, second.tenant, second.user_id) == (7, "globex", "ann")
    assert (second.outcome, second.estimated, second.tokens) == ("cut_off", True, 17)


def test_counts_and_seconds_are_never_negative() -> None:
    with llm_usage.ledger(llm_usage.SUMMARY) as ledger:
        call = llm_usage.record(-5, -1, -0.1, llm_usage.UNREACHABLE)
    assert (call.prompt_tokens, call.completion_tokens, call.seconds) == (0, 0, 0.0)
    assert ledger.unwritten() == [call]


def test_a_nested_stage_names_its_calls_and_ends_with_its_block() -> None:
    with llm_usage.ledger(llm_usage.EXTRACTION) as ledger:
        with llm_usage.stage(llm_usage.RESOLUTION):
            inner = llm_usage.record(1, 1, 0, llm_usage.OK)
        after = llm_usage.record(1, 1, 0, llm_usage.OK)
    assert [c.stage for c in ledger.unwritten()] == ["resolution", "extraction"]
    assert (inner.stage, after.stage) == ("resolution", "extraction")


def test_outside_any_ledger_a_call_is_unattributed_and_kept_nowhere() -> None:
    assert llm_usage.current() is None
    llm_usage.attribute(7, "acme")  # no ledger: nothing to attribute
    call = llm_usage.record(3, 2, 0.1, llm_usage.OK)
    assert (call.stage, call.project_id, call.tenant) == ("unattributed", 0, "")
    with llm_usage.stage(llm_usage.SELECTION):
        # A stage names the call even so, but no ledger keeps it.
        assert llm_usage.record(1, 1, 0, llm_usage.OK).stage == "selection"
    assert llm_usage.current() is None


def test_a_ledger_ends_with_its_block_and_an_inner_one_gives_the_outer_back() -> None:
    with llm_usage.ledger(llm_usage.OVERVIEW) as outer:
        with llm_usage.ledger(llm_usage.SUMMARY) as inner:
            assert llm_usage.current() is inner
            llm_usage.record(1, 1, 0, llm_usage.OK)
        assert llm_usage.current() is outer
        llm_usage.record(2, 2, 0, llm_usage.OK)
    assert llm_usage.current() is None
    assert [c.stage for c in inner.unwritten()] == ["summary"]
    assert [c.stage for c in outer.unwritten()] == ["overview"]


async def test_a_ledger_reaches_the_tasks_started_inside_it() -> None:
    async def call() -> llm_usage.LLMCall:
        return llm_usage.record(5, 5, 0, llm_usage.OK)

    with llm_usage.ledger(llm_usage.FORMATION, 2, "acme") as ledger:
        made = await asyncio.gather(asyncio.create_task(call()), asyncio.create_task(call()))
    assert ledger.unwritten() == made
    assert all(c.project_id == 2 for c in made)


def test_calls_written_leave_the_ledger_by_identity_not_by_value() -> None:
    ledger = llm_usage.Ledger(llm_usage.EXTRACTION)
    one = llm_usage.LLMCall("extraction", 1, "acme", 1, 1, 0.0, "ok", at=1.0)
    same = llm_usage.LLMCall("extraction", 1, "acme", 1, 1, 0.0, "ok", at=1.0)
    assert one == same
    ledger.add(one)
    ledger.add(same)
    ledger.written([one])
    [left] = ledger.unwritten()
    assert left is same
    ledger.unwritten().clear()  # a copy: the ledger keeps its calls
    assert ledger.unwritten() == [same]


def test_a_stage_ended_in_a_foreign_context_is_put_back_by_hand() -> None:
    # A streaming RPC's generator the caller abandoned is closed by the event
    # loop in a context of its own, where the stage's token is not valid.
    started = contextvars.copy_context()
    block = llm_usage.stage(llm_usage.OVERVIEW)
    started.run(block.__enter__)
    assert started.run(lambda: llm_usage.record(1, 1, 0, llm_usage.OK).stage) == "overview"
    foreign = started.run(contextvars.copy_context)
    foreign.run(block.__exit__, None, None, None)  # no ValueError
    assert foreign.run(lambda: llm_usage.record(1, 1, 0, llm_usage.OK).stage) == "unattributed"


def test_the_totals_count_calls_tokens_and_seconds_per_stage() -> None:
    totals = llm_usage.CallTotals()
    for stage, prompt, completion, seconds, outcome in [
        ("extraction", 10, 4, 0.5, "ok"),
        ("extraction", 12, 0, 0.25, "timeout"),
        ("extraction", 8, 2, 0.25, "ok"),
        ("summary", 100, 50, 2.0, "ok"),
    ]:
        totals.count(llm_usage.LLMCall(stage, 0, "", prompt, completion, seconds, outcome, 0.0))
    calls, counted, seconds = totals.snapshot()
    assert calls == {("extraction", "ok"): 2, ("extraction", "timeout"): 1, ("summary", "ok"): 1}
    assert counted == {
        ("extraction", "prompt"): 30,
        ("extraction", "completion"): 6,
        ("summary", "prompt"): 100,
        ("summary", "completion"): 50,
    }
    assert seconds == {"extraction": 1.0, "summary": 2.0}
    calls[("summary", "ok")] = 99  # a snapshot is a copy
    assert totals.snapshot()[0][("summary", "ok")] == 1
