"""Guards found by a mutation audit of the unit tier: when the scrub of
deleted bytes is due (domain/erasure.py's ``scrub_soon``).

The rest of erasure is tests/unit/test_erasure_deletes.py's and
tests/unit/test_erasure_rules.py's."""

from __future__ import annotations

from nexus_grpc.domain import erasure
from tests.fakes import FakeUnitOfWork


def test_a_delete_asking_for_a_sooner_scrub_brings_it_forward_and_none_postpones_it():
    uow = FakeUnitOfWork()
    erasure.scrub_soon(uow, 600.0)
    later = erasure.scrub_due(uow)
    assert later is not None
    erasure.scrub_soon(uow, 60.0)
    sooner = erasure.scrub_due(uow)
    assert sooner is not None and sooner < later - 500
    erasure.scrub_soon(uow, 600.0)
    assert erasure.scrub_due(uow) == sooner
