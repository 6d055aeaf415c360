"""WatchExtractions' slots and wake-ups (core/events.py), on the broadcaster
alone, beside the caps tests/unit/test_limits_watch_streams.py tests: a key
with no name is called by its id, a refused stream holds no slot, a stream
that fails gives its slots back, and the notify/close wake-ups a waiting
stream reads again on.

That the refusals reach a client over the wire with their details is the
whole-server tier's: tests/e2e/api/test_limits.py, test_small_holes.py and
test_error_details.py.
"""

from __future__ import annotations

import contextlib

import pytest

from nexus_grpc.core.events import EventBroadcaster
from nexus_grpc.errors import ErrorInfo, ResourceExhausted


def _refusal(b: EventBroadcaster, **who: str | None) -> ResourceExhausted:
    with pytest.raises(ResourceExhausted) as err, b.watching(**who):
        pass
    return err.value


def test_a_key_with_no_name_is_called_by_its_id():
    b = EventBroadcaster(max_per_key=1)
    with b.watching("key-7"):
        refused = _refusal(b, key="key-7")
    assert "'key-7' already has 1" in refused.message
    assert refused.details[1] == ErrorInfo("WATCH_STREAM_LIMIT_PER_KEY", {"api_key": "key-7"})


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
