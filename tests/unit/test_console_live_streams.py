"""How many live timelines the console streams (console/live.py): a few per
browser and a cap over all, so that the console's key keeps watch streams
(the server's --max-watch-streams-per-key) for its other clients."""

from __future__ import annotations

import pytest

from nexus_grpc.console.live import StreamSlots
from nexus_grpc.console.security import Refused


def test_a_browser_holds_a_few_streams_and_the_console_a_few_more():
    slots = StreamSlots(per_browser=2, total=3)
    a1, a2 = slots.take("browser-a"), slots.take("browser-a")
    with pytest.raises(Refused) as mine:
        slots.take("browser-a")
    assert mine.value.status == 429 and "this browser already has 2" in mine.value.message
    slots.take("browser-b")
    with pytest.raises(Refused) as everyone:
        slots.take("browser-c")
    assert everyone.value.status == 429 and "already streams 3" in everyone.value.message
    a1()
    a1()  # a stream ends once, however many ways it ends
    assert slots.open == 2
    slots.take("browser-c")
    a2()
    assert slots.open == 2


def test_a_stream_needs_a_browser_that_loaded_a_page():
    with pytest.raises(Refused) as refused:
        StreamSlots().take("")
    assert refused.value.status == 403 and "open the project's timeline" in refused.value.message
