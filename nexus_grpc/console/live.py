"""The live pages: a project's WatchExtractions (the timeline's states) and
an erasure's WatchErasure (its progress) as Server-Sent Events, and how many
of those streams the console holds open.

Each stream holds one of the console key's watch streams on the server
(``--max-watch-streams-per-key``, 16 by default), and the key's other
clients (an agent watching its extractions) need theirs.  So a stream is
opened only for a browser that loaded a console page (it carries the
console's cookie), at most ``PER_BROWSER`` for one browser and ``TOTAL``
for all of them together; beyond that the page works on, without live
states.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.console import people, reads
from nexus_grpc.console.security import Refused

__all__ = ["HeldStream", "StreamSlots", "erasure_steps", "states"]

log = logging.getLogger("nexus_grpc.console")

#: How often the live stream re-reads the episodes still pending: embedding
#: finishes without an extraction event, and an event can pass while the
#: stream is being opened.
RECHECK_SECONDS = 3.0
MAX_WATCHED = 200
#: Live streams one browser may hold open (a few tabs of timelines).
PER_BROWSER = 4
#: Live streams the console holds open in all: half the server's default
#: watch streams per key, so its other clients keep the rest.
TOTAL = 8


class StreamSlots:
    """Open live streams, counted per browser and in all."""

    def __init__(self, per_browser: int = PER_BROWSER, total: int = TOTAL) -> None:
        self.per_browser = per_browser
        self.total = total
        self._open: dict[str, int] = {}

    @property
    def open(self) -> int:
        return sum(self._open.values())

    def take(self, browser: str) -> Callable[[], None]:
        """One slot for ``browser`` (its console cookie), and how to give it
        back; refused (403 without a browser, 429 past a limit) otherwise."""
        if not browser:
            raise Refused(
                403,
                "refused: live states stream to a console page; open the project's timeline"
                " (the browser keeps the console's cookie)",
            )
        if self._open.get(browser, 0) >= self.per_browser:
            raise Refused(
                429,
                f"this browser already has {self.per_browser} live timelines open; close one"
                " (or reload this page later) to follow its states live",
            )
        if self.open >= self.total:
            raise Refused(
                429,
                f"the console already streams {self.total} live timelines, the most it holds"
                " open so that its key keeps watch streams for its other clients; reload"
                " later to follow these states live",
            )
        self._open[browser] = self._open.get(browser, 0) + 1
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            if given_back:
                return
            given_back = True
            left = self._open.get(browser, 0) - 1
            if left > 0:
                self._open[browser] = left
            else:
                self._open.pop(browser, None)

        return give_back


class HeldStream(StreamingResponse):
    """A stream that gives its slot back when it ends, however it ends (the
    browser gone before the first event included)."""

    def __init__(self, content: AsyncIterator[str], give_back: Callable[[], None]) -> None:
        super().__init__(
            content, media_type="text/event-stream", headers={"x-accel-buffering": "no"}
        )
        self.give_back = give_back

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.give_back()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()


async def states(client: NexusClient, project_id: int, ids: list[int]) -> AsyncIterator[str]:
    """The states of the page's episodes as they change: sent at once, then
    again whenever WatchExtractions announces one of them, and re-read every
    few seconds while any is pending (embedding has no event of its own)."""
    watched = set(ids)
    stream = client.watch_extractions(project_id=project_id)
    events: asyncio.Queue[int | None] = asyncio.Queue()

    async def listen() -> None:
        try:
            async for event in stream:
                events.put_nowait(event.episode_id)
        except NexusClientError as exc:
            log.warning("console: the extraction stream ended: %s", exc)
        finally:
            events.put_nowait(None)

    listener = asyncio.create_task(listen())
    try:
        yield "retry: 2000\n\n"
        pending = await _send_states(client, sorted(watched))
        for chunk in pending.chunks:
            yield chunk
        while True:
            try:
                episode_id = await asyncio.wait_for(events.get(), RECHECK_SECONDS)
            except TimeoutError:
                if not pending.ids:
                    yield ": still here\n\n"
                    continue
                pending = await _send_states(client, sorted(pending.ids))
            else:
                if episode_id is None:
                    return
                if episode_id not in watched:
                    continue
                pending = await _send_states(client, sorted({episode_id, *pending.ids}))
            for chunk in pending.chunks:
                yield chunk
    finally:
        stream.cancel()
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await listener


@dataclass(frozen=True)
class _Sent:
    #: Server-Sent Events, one per episode read.
    chunks: list[str]
    #: The episodes among them still pending.
    ids: set[int]


async def _send_states(client: NexusClient, ids: list[int]) -> _Sent:
    found = await reads.episode_states(client, ids)
    chunks = [f"event: episode\ndata: {json.dumps(s)}\n\n" for s in found]
    still = {
        s["id"]
        for s in found
        if "pending" in (s["embedding_state"], s["extraction_state"], s["memory_state"])
    }
    return _Sent(chunks, still)


async def erasure_steps(client: NexusClient, erasure_id: int) -> AsyncIterator[str]:
    """An erasure's progress as it goes (WatchErasure): the erasure now, then
    at every step it takes, the last one its receipt; the stream ends there.
    A watch that fails ends the stream with an ``ended`` event saying why,
    and the page reloads itself instead."""
    stream = client.watch_erasure(id=erasure_id, timeout=None)
    try:
        yield "retry: 2000\n\n"
        async for step in stream:
            view = people.erasure_view(step)
            yield f"event: erasure\ndata: {json.dumps(view)}\n\n"
            if view["finished"]:
                return
    except NexusClientError as exc:
        log.warning("console: the erasure stream ended: %s", exc)
        yield f"event: ended\ndata: {json.dumps({'code': exc.code.name})}\n\n"
    finally:
        stream.cancel()
