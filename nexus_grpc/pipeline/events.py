"""In-process wake-ups for extraction watchers.

The event log in SQLite is the source of truth; this only tells waiting
streams "something was committed, read again".  It holds no events, so a slow
or idle watcher costs nothing here: each stream keeps a cursor and reads its
next page from the database.

Use: take ``current()`` *before* reading, then wait on it if the read found
nothing.  A notify between the read and the wait has already set that very
event, so no wake-up is lost.
"""

from __future__ import annotations

import asyncio
import contextlib


class EventBroadcaster:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._closed = False
        self.notifications = 0

    @property
    def closed(self) -> bool:
        return self._closed

    def current(self) -> asyncio.Event:
        """The event the next ``notify`` sets."""
        return self._event

    def notify(self) -> None:
        """Call after a commit that wrote events: wake every waiting watcher."""
        self.notifications += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    def close(self) -> None:
        """Shutdown: watchers see ``closed`` once woken and end their streams."""
        self._closed = True
        self.notify()

    async def wait(self, event: asyncio.Event, timeout: float) -> None:  # noqa: ASYNC109
        """Wait for ``event`` (from ``current()``) or ``timeout``, whichever first."""
        if self._closed:
            return
        # asyncio.timeout, not wait_for: on 3.11, wait_for can swallow a
        # cancellation that lands as the event is set.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()
