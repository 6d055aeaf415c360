"""How long extraction events are kept (domain/event_retention.py), on the
fakes' events: an event older than the retention goes, a newer one stays,
and one purge takes at most CHUNK of them (the storage upkeep runs it again
until none is left).

That a watcher's replay starts no earlier than the oldest event kept is
WatchExtractions', tested with the stream (tests/e2e/service/test_watch.py).
"""

from __future__ import annotations

from dataclasses import replace

from nexus_grpc.domain import event_retention
from nexus_grpc.domain.event_retention import oldest_kept, purge
from tests.fakes import FakeUnitOfWork

DAY = 86_400.0


def _events(uow: FakeUnitOfWork, created: list[float]) -> list[int]:
    """Events made at these times (seconds since the epoch)."""
    session = uow.sessions.insert("s", "", 0, {}, "t1").id
    ids = []
    for at in created:
        event_id = uow.events.insert(1, session, 0, 1)
        event, tenant = uow.events.rows[event_id]
        uow.events.rows[event_id] = (replace(event, created_at=at), tenant)
        ids.append(event_id)
    return ids


def test_the_oldest_event_kept_is_the_retention_before_now():
    assert oldest_kept(at=10 * DAY, retention=7 * DAY) == 3 * DAY


def test_a_purge_takes_the_events_past_the_retention_and_keeps_the_rest():
    uow = FakeUnitOfWork()
    old, edge, new = _events(uow, [1 * DAY, 3 * DAY, 5 * DAY])
    assert purge(uow, at=10 * DAY, retention=7 * DAY) == 1
    assert sorted(uow.events.rows) == [edge, new]  # made at the cutoff itself: kept
    assert old not in uow.events.rows


def test_one_purge_takes_at_most_a_chunk(monkeypatch):
    monkeypatch.setattr(event_retention, "CHUNK", 2)
    uow = FakeUnitOfWork()
    ids = _events(uow, [1.0, 2.0, 3.0, 5 * DAY])
    assert purge(uow, at=10 * DAY, retention=7 * DAY) == 2
    assert purge(uow, at=10 * DAY, retention=7 * DAY) == 1
    assert purge(uow, at=10 * DAY, retention=7 * DAY) == 0
    assert sorted(uow.events.rows) == [ids[-1]]
