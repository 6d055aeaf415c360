"""The fair cap as a property (domain/memories.py ``_check_cap``), on the fakes
of tests/fakes.py: no interleaving of users' creates refuses a user who is
under their own cap.

Random sequences of creates (users, kinds, tiers, agents, projects), archive
and un-archive updates and deletes run against the domain's Memories. A plain
model counts each owner's memories outside the ARCHIVE tier (PROJECT per
(project, agent), USER per (project, agent, user)); every create must succeed
exactly when its own owner is under the cap, and a refusal must name that
owner's count and no one else's. The count the rule reads is the store's
``count_in_cap_scope``, the same on the fake, SQLite and PostgreSQL by
tests/integration/store/test_repository_contract.py; the same property on
PostgreSQL, whose check and insert share a transaction that others may run
beside, is tests/e2e/service/test_memory_cap_property.py's. Both run ``check`` and
the sequences of tests/memory_cap_check.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from hypothesis import given, settings

from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.memories import Memories
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.memory_cap_check import CAP, SETTINGS, T, check, long_ops


class FakeWorld:
    """The domain on a fresh set of fakes."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        uow = FakeUnitOfWork()
        # Neither the embedder nor the vector index is read by the cap.
        self.memories = Memories(FakeDatabase(uow), JobSignals(), None, None, cap=CAP)  # type: ignore[arg-type]
        self.project = uow.projects.insert({"name": "shared"}).id

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)


@settings(max_examples=40, **SETTINGS)
@given(sequence=long_ops)
def test_no_interleaving_refuses_a_user_under_their_own_cap(sequence):
    loop = asyncio.new_event_loop()
    try:
        check(FakeWorld(loop), sequence)
    finally:
        loop.close()
