"""The WatchExtractions stream caps (core/events.py's EventBroadcaster): of
the server, of one API key and of one tenant, each refusal naming its limit
and how to raise it, and a slot given back when its stream ends. Called
directly; the streams over the wire stay in tests/e2e/api/test_small_holes.py
(one key), tests/e2e/api/test_limits.py (one tenant) and
tests/e2e/api/test_error_details.py (the server's, with its details).
"""

from __future__ import annotations

import contextlib

import pytest

from nexus_grpc.core.events import EventBroadcaster
from nexus_grpc.errors import ErrorInfo, QuotaViolation, ResourceExhausted


def refused(events: EventBroadcaster, *args: str | None) -> ResourceExhausted:
    with pytest.raises(ResourceExhausted) as err, events.watching(*args):
        pass
    return err.value


def test_one_key_cannot_hold_every_watch_slot():
    events = EventBroadcaster(max_watchers=16, max_per_key=2)
    with contextlib.ExitStack() as held:
        held.enter_context(events.watching("keys[0]", "a", None))
        second = held.enter_context(contextlib.ExitStack())
        second.enter_context(events.watching("keys[0]", "a", None))
        err = refused(events, "keys[0]", "a", None)
        for text in ("'a' already has 2", "--max-watch-streams-per-key", "(now 2)"):
            assert text in err.message
        assert err.details == (
            QuotaViolation("api_key:a", "WatchExtractions streams per API key: at most 2;"
                           " this key has 2 open", quota_id="max-watch-streams-per-key",
                           quota_value=2),
            ErrorInfo("WATCH_STREAM_LIMIT_PER_KEY", {"api_key": "a"}),
        )  # fmt: skip
        # Another key still gets a stream: the server's cap is far off.
        with events.watching("keys[1]", "b", None):
            assert events.watchers == 3
        # A slot the key frees is its own again.
        second.close()
        with events.watching("keys[0]", "a", None):
            assert events.watchers == 2
    assert events.watchers == 0 and events.refused == 1


def test_one_tenants_keys_together_leave_watch_slots_to_other_tenants():
    events = EventBroadcaster(max_watchers=16, max_per_key=4, max_per_tenant=2)
    with events.watching("keys[0]", "b0", "tb"), events.watching("keys[1]", "b1", "tb"):
        err = refused(events, "keys[2]", "b2", "tb")
        assert "the keys of tenant 'tb' already have 2 WatchExtractions streams" in err.message
        assert "(now 2)" in err.message
        assert err.details[-1] == ErrorInfo("WATCH_STREAM_LIMIT_PER_TENANT", {"tenant": "tb"})
        with events.watching("keys[3]", "a", "ta"):
            assert events.watchers == 3
    with events.watching("keys[2]", "b2", "tb"):
        assert events.watchers == 1


def test_the_servers_watch_cap_is_a_quota_failure():
    events = EventBroadcaster(max_watchers=1, max_per_key=0)
    with events.watching("keys[0]", "a", None):
        err = refused(events, "keys[1]", "ops", None)
        assert "--max-watch-streams" in err.message
        assert err.details == (
            QuotaViolation("server", "WatchExtractions streams on this server: at most 1",
                           quota_id="max-watch-streams", quota_value=1),
            ErrorInfo("WATCH_STREAM_LIMIT"),
        )  # fmt: skip
        # With auth off there is no key or tenant, only the server's cap.
        assert isinstance(refused(events, None, "", None), ResourceExhausted)
    assert events.watchers == 0 and events.refused == 2


def test_no_limit_at_zero():
    events = EventBroadcaster(max_watchers=0, max_per_key=0, max_per_tenant=0)
    with contextlib.ExitStack() as held:
        for _ in range(50):
            held.enter_context(events.watching("keys[0]", "a", "t"))
        assert events.watchers == 50
    assert events.watchers == 0
