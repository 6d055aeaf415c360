"""Writing the LLM's account (core/llm_usage.py) where no job worker does.

A job's calls are written by its worker with the job's outcome. An RPC that
calls the LLM (SelectMemories, SummarizeSession, SummarizeProject) opens its
own ledger with ``accounted``; the use case writes the calls in the
transaction that keeps what they produced (``pending``, then ``written`` once
that committed), and whatever is left when the call ends, however it ends
(a failure, a cancelled stream), is written in a transaction of its own.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence

from nexus_grpc.core import llm_usage
from nexus_grpc.core.llm_usage import Ledger, LLMCall
from nexus_grpc.core.storage import Database

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def accounted(db: Database, stage: str) -> AsyncIterator[Ledger]:
    """A ledger for the LLM calls of one RPC, written when it ends."""
    with llm_usage.ledger(stage) as ledger:
        try:
            yield ledger
        finally:
            await flush(db, ledger)


async def flush(db: Database, ledger: Ledger) -> None:
    calls = ledger.unwritten()
    if not calls:
        return
    try:
        await db.write(lambda uow: uow.usage.insert(calls))
    except Exception:
        # The answer (or the error) the caller is owed matters more than
        # the account of it: the calls stay counted in /metrics.
        log.exception("the account of %d LLM calls could not be written", len(calls))
    else:
        ledger.written(calls)


def pending() -> list[LLMCall]:
    """The current ledger's calls not yet written (none without a ledger)."""
    ledger = llm_usage.current()
    return ledger.unwritten() if ledger is not None else []


def written(calls: Sequence[LLMCall]) -> None:
    """``calls`` were committed with what they produced."""
    ledger = llm_usage.current()
    if ledger is not None:
        ledger.written(calls)
