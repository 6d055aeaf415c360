"""WatchExtractions' slots and wake-ups (core/events.py), on the broadcaster
alone: the server's, one key's and one tenant's caps on open streams, what a
refusal tells the client, a slot given back when its stream ends, and the
notify/close wake-ups a waiting stream reads again on.

That the refusals reach a client over the wire with their details, and that
the caps are flags, is the whole-server tier's: tests/e2e/api/test_limits.py,
test_small_holes.py, test_error_details.py and
tests/e2e/faults/test_fault_streams.py.
"""

from __future__ import annotations

import contextlib

import pytest

from nexus_grpc.core.events import EventBroadcaster
from nexus_grpc.errors import ErrorInfo, QuotaViolation, ResourceExhausted


def _refusal(b: EventBroadcaster, **who: str | None) -> ResourceExhausted:
    with pytest.raises(ResourceExhausted) as err, b.watching(**who):
        pass
    return err.value


def test_one_key_holds_at_most_its_cap_and_the_refusal_names_the_key_and_the_flag():
    b = EventBroadcaster(max_watchers=10, max_per_key=2)
    with b.watching("k1", "alice"), b.watching("k1", "alice"):
        refused = _refusal(b, key="k1", name="alice")
        # Another key is not held back by this one's streams.
        with b.watching("k2", "bob"):
            assert b.watchers == 3
    assert "'alice' already has 2" in refused.message
    assert "--max-watch-streams-per-key" in refused.message and "(now 2)" in refused.message
    quota, info = refused.details
    assert quota == QuotaViolation(
        "api_key:alice",
        "WatchExtractions streams per API key: at most 2; this key has 2 open",
        quota_id="max-watch-streams-per-key",
        quota_value=2,
    )
    assert info == ErrorInfo("WATCH_STREAM_LIMIT_PER_KEY", {"api_key": "alice"})


def test_a_key_with_no_name_is_called_by_its_id():
    b = EventBroadcaster(max_per_key=1)
    with b.watching("key-7"):
        refused = _refusal(b, key="key-7")
    assert "'key-7' already has 1" in refused.message
    assert refused.details[1] == ErrorInfo("WATCH_STREAM_LIMIT_PER_KEY", {"api_key": "key-7"})


def test_the_keys_of_one_tenant_hold_at_most_the_tenants_cap_together():
    b = EventBroadcaster(max_watchers=10, max_per_key=5, max_per_tenant=2)
    with b.watching("k1", tenant="ta"), b.watching("k2", tenant="ta"):
        refused = _refusal(b, key="k3", tenant="ta")
        with b.watching("k4", tenant="tb"):  # another tenant has its own count
            pass
    assert "tenant 'ta' already have 2" in refused.message
    assert "--max-watch-streams-per-tenant" in refused.message
    quota, info = refused.details
    assert (quota.subject, quota.quota_id, quota.quota_value) == (
        "tenant:ta",
        "max-watch-streams-per-tenant",
        2,
    )
    assert info == ErrorInfo("WATCH_STREAM_LIMIT_PER_TENANT", {"tenant": "ta"})


def test_the_server_holds_at_most_its_cap_whoever_asks():
    b = EventBroadcaster(max_watchers=2, max_per_key=0)
    with b.watching(), b.watching("k1"):
        refused = _refusal(b, key="k2")
    assert "the server already has 2 WatchExtractions streams open" in refused.message
    assert "--max-watch-streams /" in refused.message
    quota, info = refused.details
    assert (quota.subject, quota.quota_id, quota.quota_value) == ("server", "max-watch-streams", 2)
    assert info == ErrorInfo("WATCH_STREAM_LIMIT")


def test_a_cap_of_zero_or_less_is_no_limit():
    b = EventBroadcaster(max_watchers=0, max_per_key=-1, max_per_tenant=0)
    with contextlib.ExitStack() as streams:
        for _ in range(40):
            streams.enter_context(b.watching("k1", tenant="ta"))
        assert b.watchers == 40
    assert b.refused == 0


def test_a_refused_stream_holds_no_slot_and_is_counted():
    b = EventBroadcaster(max_watchers=5, max_per_key=1, max_per_tenant=5)
    with b.watching("k1", tenant="ta"):
        _refusal(b, key="k1", tenant="ta")
        assert b.watchers == 1
        # The refusal took none of the tenant's slots: four more keys still fit.
        with contextlib.ExitStack() as streams:
            for key in ("k2", "k3", "k4", "k5"):
                streams.enter_context(b.watching(key, tenant="ta"))
    assert b.refused == 1


def test_a_stream_that_ends_gives_its_slots_back_even_when_it_fails():
    b = EventBroadcaster(max_watchers=1, max_per_key=1, max_per_tenant=1)
    with pytest.raises(RuntimeError), b.watching("k1", tenant="ta"):
        raise RuntimeError("the stream broke")
    assert b.watchers == 0
    with b.watching("k1", tenant="ta"):  # the same key and tenant fit again
        assert b.watchers == 1


async def test_notify_sets_the_event_taken_before_and_hands_out_a_fresh_one():
    b = EventBroadcaster()
    before = b.current()
    b.notify()
    assert before.is_set()
    assert not b.current().is_set() and b.current() is not before
    assert b.notifications == 1
    # A wait on the set event returns without waiting out its timeout.
    await b.wait(before, timeout=3600)


async def test_close_wakes_every_watcher_and_a_later_wait_returns_at_once():
    b = EventBroadcaster()
    waiting = b.current()
    b.close()
    assert b.closed and waiting.is_set()
    await b.wait(b.current(), timeout=3600)  # never set: returns because closed
