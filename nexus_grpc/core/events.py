"""In-process wake-ups for extraction watchers.

The event log in SQLite is the source of truth; this only tells waiting
streams "something was committed, read again".  It holds no events, so a slow
or idle watcher costs nothing here: each stream keeps a cursor and reads its
next page from the database.

Use: take ``current()`` *before* reading, then wait on it if the read found
nothing.  A notify between the read and the wait has already set that very
event, so no wake-up is lost.

What a watcher does cost is its stream: a coroutine, grpc's call state, and
the page of events it is sending (bounded by the page size; gRPC flow control
stops it reading further ahead of a slow reader).  Those streams live as long
as their clients want, so they have their own cap, ``max_watchers``
(``--max-watch-streams``), apart from the server-wide cap on concurrent RPCs:
without it, idle watchers alone could hold every RPC slot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from nexus_grpc.errors import ErrorInfo, QuotaViolation, ResourceExhausted

#: The default of ``--max-watch-streams``: half the default RPC cap (512), so
#: watchers can never take every slot from unary calls.
DEFAULT_MAX_WATCHERS = 256


#: The default of ``--max-watch-streams-per-key``.
DEFAULT_MAX_WATCHERS_PER_KEY = 16


class EventBroadcaster:
    def __init__(
        self,
        max_watchers: int = DEFAULT_MAX_WATCHERS,
        max_per_key: int = DEFAULT_MAX_WATCHERS_PER_KEY,
        max_per_tenant: int = 0,
    ) -> None:
        self._event = asyncio.Event()
        self._closed = False
        self.notifications = 0
        #: 0 or less: no limit.
        self.max_watchers = max_watchers
        #: Streams one API key may hold (0 or less: no limit), so one client
        #: cannot take every slot and lock every other client out.
        self.max_per_key = max_per_key
        #: Streams the keys of one tenant may hold together (0 or less: no
        #: limit), so a tenant with many keys cannot take every slot either.
        self.max_per_tenant = max_per_tenant
        self.watchers = 0
        self._by_key: dict[str, int] = {}
        self._by_tenant: dict[str, int] = {}
        self.refused = 0

    @property
    def closed(self) -> bool:
        return self._closed

    @contextlib.contextmanager
    def watching(
        self, key: str | None = None, name: str = "", tenant: str | None = None
    ) -> Iterator[None]:
        """Hold one of the ``max_watchers`` slots for a stream's lifetime, one
        of ``key``'s ``max_per_key`` and one of ``tenant``'s ``max_per_tenant``
        (None: auth is off, and there is no key or tenant to tell clients
        apart). ``key`` identifies the API key itself (``Principal.key_id``),
        never its name; ``name`` is what the refusal calls it.

        Raises ``ResourceExhausted`` when all are taken: the client is told
        the limit and how to raise it, and may retry once a stream closes.
        """
        held, in_tenant = self._admit(key, name, tenant)
        self.watchers += 1
        if key is not None:
            self._by_key[key] = held + 1
        if tenant is not None:
            self._by_tenant[tenant] = in_tenant + 1
        try:
            yield
        finally:
            self.watchers -= 1
            if key is not None:
                _give_back(self._by_key, key)
            if tenant is not None:
                _give_back(self._by_tenant, tenant)

    def _admit(self, key: str | None, name: str, tenant: str | None) -> tuple[int, int]:
        """The streams ``key`` and ``tenant`` hold now, once a new one fits
        under every limit; ``ResourceExhausted`` (counted in ``refused``) when
        one is reached."""
        held = self._by_key.get(key, 0) if key is not None else 0
        if key is not None and 0 < self.max_per_key <= held:
            self.refused += 1
            raise ResourceExhausted(
                f"API key {name or key!r} already has {held} WatchExtractions streams open,"
                " the limit for one key; close streams you no longer need and retry with"
                " backoff, or raise the limit with --max-watch-streams-per-key /"
                f" NEXUS_MAX_WATCH_STREAMS_PER_KEY (now {self.max_per_key})",
                details=(
                    QuotaViolation(
                        f"api_key:{name or key}",
                        f"WatchExtractions streams per API key: at most {self.max_per_key};"
                        f" this key has {held} open",
                        quota_id="max-watch-streams-per-key",
                        quota_value=self.max_per_key,
                    ),
                    ErrorInfo("WATCH_STREAM_LIMIT_PER_KEY", {"api_key": name or key}),
                ),
            )
        in_tenant = self._by_tenant.get(tenant, 0) if tenant is not None else 0
        if tenant is not None and 0 < self.max_per_tenant <= in_tenant:
            self.refused += 1
            raise ResourceExhausted(
                f"the keys of tenant {tenant!r} already have {in_tenant} WatchExtractions"
                " streams open together, the limit for one tenant; close streams you no longer"
                " need and retry with backoff, or raise the limit with"
                " --max-watch-streams-per-tenant / NEXUS_MAX_WATCH_STREAMS_PER_TENANT"
                f" (now {self.max_per_tenant})",
                details=(
                    QuotaViolation(
                        f"tenant:{tenant}",
                        f"WatchExtractions streams per tenant: at most {self.max_per_tenant};"
                        f" this tenant has {in_tenant} open",
                        quota_id="max-watch-streams-per-tenant",
                        quota_value=self.max_per_tenant,
                    ),
                    ErrorInfo("WATCH_STREAM_LIMIT_PER_TENANT", {"tenant": tenant}),
                ),
            )
        if 0 < self.max_watchers <= self.watchers:
            self.refused += 1
            raise ResourceExhausted(
                f"the server already has {self.watchers} WatchExtractions streams open, its"
                f" limit; close streams you no longer need and retry with backoff, or raise the"
                f" limit with --max-watch-streams / NEXUS_MAX_WATCH_STREAMS"
                f" (now {self.max_watchers})",
                details=(
                    QuotaViolation(
                        "server",
                        f"WatchExtractions streams on this server: at most {self.max_watchers}",
                        quota_id="max-watch-streams",
                        quota_value=self.max_watchers,
                    ),
                    ErrorInfo("WATCH_STREAM_LIMIT"),
                ),
            )
        return held, in_tenant

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


def _give_back(held: dict[str, int], owner: str) -> None:
    left = held[owner] - 1
    if left:
        held[owner] = left
    else:
        del held[owner]
