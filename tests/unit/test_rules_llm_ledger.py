"""Whose an LLM call is (core/llm_usage.py), with the calls recorded by
hand as the clients record them: under the innermost stage and the open
ledger's project, tenant and user (attributed once the work's owner is
known), ``unattributed`` outside any ledger; counts never below zero; a
ledger keeps only the calls not yet written; a ledger closed in another
context is put back by hand; and the process's totals for /metrics.

What the clients record for each answer (the server's token counts, an
estimate, the outcome) is tests/integration/llm/test_llm_accounting.py's.
"""

from __future__ import annotations

import contextvars

from nexus_grpc.core import llm_usage
from nexus_grpc.core.llm_usage import COMPLETION, PROMPT, CallTotals


def test_a_call_counts_under_the_ledgers_stage_project_and_tenant():
    with llm_usage.ledger(llm_usage.EXTRACTION, project_id=3, tenant="t1") as opened:
        call = llm_usage.record(120, 30, 1.5, llm_usage.OK)
    assert (call.stage, call.project_id, call.tenant, call.user_id) == ("extraction", 3, "t1", "")
    assert (call.prompt_tokens, call.completion_tokens, call.tokens) == (120, 30, 150)
    assert opened.unwritten() == [call]


def test_work_attributed_later_counts_its_later_calls_for_that_owner():
    with llm_usage.ledger(llm_usage.FORMATION) as opened:
        before = llm_usage.record(1, 1, 0.1, llm_usage.OK)
        llm_usage.attribute(7, "t2", "ann")
        after = llm_usage.record(1, 1, 0.1, llm_usage.OK)
    assert (before.project_id, before.tenant, before.user_id) == (0, "", "")
    assert (after.project_id, after.tenant, after.user_id) == (7, "t2", "ann")
    assert opened.unwritten() == [before, after]


def test_a_nested_stage_counts_apart_in_the_same_ledger():
    with llm_usage.ledger(llm_usage.EXTRACTION, project_id=3) as opened:
        with llm_usage.stage(llm_usage.RESOLUTION):
            inner = llm_usage.record(5, 5, 0.1, llm_usage.OK)
        outer = llm_usage.record(5, 5, 0.1, llm_usage.OK)
    assert (inner.stage, outer.stage) == ("resolution", "extraction")
    assert inner.project_id == 3 and opened.unwritten() == [inner, outer]


def test_a_call_outside_any_ledger_is_unattributed_and_kept_nowhere():
    assert llm_usage.current() is None
    llm_usage.attribute(7, "t2", "ann")  # no ledger: nothing to attribute
    call = llm_usage.record(5, 5, 0.1, llm_usage.TIMEOUT)
    assert (call.stage, call.project_id, call.tenant, call.user_id) == ("unattributed", 0, "", "")
    with llm_usage.stage(llm_usage.SELECTION):
        assert llm_usage.record(0, 0, 0.0, llm_usage.OK).stage == "selection"


def test_counts_and_seconds_are_never_below_zero():
    call = llm_usage.record(-5, -1, -0.5, llm_usage.BAD_ANSWER, estimated=True)
    assert (call.prompt_tokens, call.completion_tokens, call.seconds) == (0, 0, 0.0)
    assert call.estimated and call.outcome == "bad_answer"


def test_a_ledger_keeps_only_the_calls_not_yet_written():
    with llm_usage.ledger(llm_usage.SUMMARY) as opened:
        first = llm_usage.record(1, 1, 0.1, llm_usage.OK)
        second = llm_usage.record(1, 1, 0.1, llm_usage.OK)
        opened.written([first])
        assert opened.unwritten() == [second]
        # Equal calls are still two calls: only the one written goes.
        twin = llm_usage.record(1, 1, 0.1, llm_usage.OK)
        opened.written([second])
        assert opened.unwritten() == [twin]
    assert llm_usage.current() is None


def test_a_ledger_closed_in_another_context_is_put_back_by_hand():
    # A streaming RPC abandoned by its caller is closed by the event loop in a
    # context of its own, where the token is not valid: no error, and no ledger
    # is left open there; the context it was opened in is not touched.
    blocks = llm_usage.ledger(llm_usage.SELECTION)
    opened_in = contextvars.copy_context()
    opened = opened_in.run(blocks.__enter__)
    closing_in = opened_in.copy()
    closing_in.run(blocks.__exit__, None, None, None)
    assert closing_in.run(llm_usage.current) is None
    assert opened_in.run(llm_usage.current) is opened
    assert llm_usage.current() is None


def test_the_totals_count_calls_by_outcome_and_tokens_by_direction():
    totals = CallTotals()
    with llm_usage.ledger(llm_usage.EXTRACTION):
        for outcome, prompt, completion in (
            (llm_usage.OK, 10, 2),
            (llm_usage.OK, 5, 1),
            (llm_usage.TIMEOUT, 0, 0),
        ):
            totals.count(llm_usage.record(prompt, completion, 0.5, outcome))
    calls, tokens, seconds = totals.snapshot()
    assert calls == {("extraction", "ok"): 2, ("extraction", "timeout"): 1}
    assert tokens == {("extraction", PROMPT): 15, ("extraction", COMPLETION): 3}
    assert seconds == {"extraction": 1.5}
    calls[("extraction", "ok")] = 99  # a snapshot is a copy
    assert totals.snapshot()[0][("extraction", "ok")] == 2
