"""The typed client behind an adapter, the project it works in, and the
bridge its synchronous methods cross.

An adapter is given a ``NexusClient`` (``client=``) or a ``target`` and the
client's options, and a project by name: found in the API key's own tenant,
or created there on first use (``nexus_grpc.client.name_lookup``); its id is
resolved once and remembered.

The frameworks have synchronous methods too (``store.get``,
``retriever.invoke``, ``history.messages``). A ``grpc.aio`` channel belongs
to the event loop it was opened on, and a synchronous caller may be inside
another loop's thread or in none, so synchronous calls run on a loop of the
adapter's own, in a daemon thread, over a copy of the client
(``NexusClient.copy``: same target, key, TLS, deadline and retries; a
channel of its own). Async methods run on the caller's loop and never block
it.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.client.name_lookup import find_or_create_project
from nexus_grpc.control_chars import CONTROL_CHARS
from nexus_grpc.integrations.conventional_errors import conventional

__all__ = ["MAX_METADATA_BYTES", "AdapterClient", "check_label", "one_line"]

T = TypeVar("T")

MAX_LABEL_CHARS = 200
#: The most bytes a record's metadata takes as JSON (the server's limit,
#: domain/validation.py): what a LangGraph item and an episode's messages
#: outside its exchange must fit in.
MAX_METADATA_BYTES = 64_000


def check_label(what: str, value: object, *, required: bool = True) -> str:
    """``value`` if the server would take it as a name or id; ``ValueError`` otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise ValueError(f"{what} must not be blank")
    if len(value) > MAX_LABEL_CHARS:
        raise ValueError(f"{what} is {len(value)} characters; the limit is {MAX_LABEL_CHARS}")
    if CONTROL_CHARS.search(value):
        raise ValueError(f"{what} must not contain control characters: {value!r}")
    if value != value.strip():
        raise ValueError(f"{what} must not start or end with whitespace: {value!r}")
    return value


def one_line(text: str) -> str:
    """``text`` as a one-line label the server takes (a memory's title):
    control characters and runs of whitespace become single spaces."""
    return " ".join(CONTROL_CHARS.sub(" ", text).split())


class _Bridge:
    """An event loop in a daemon thread, for the synchronous methods."""

    def __init__(self, client: NexusClient) -> None:
        self.client = client
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="nexus-grpc-integration", daemon=True
        )
        self.thread.start()

    def run(self, pending: Awaitable[T]) -> T:
        if _running_loop() is self.loop:
            raise RuntimeError("a synchronous nexus adapter method was called on its own loop")

        async def call() -> T:
            return await pending

        future: Future[T] = asyncio.run_coroutine_threadsafe(call(), self.loop)
        return future.result()

    def close(self) -> None:
        try:
            self.run(self.client.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
            if not self.thread.is_alive():
                self.loop.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Shared:
    """What every adapter built on one client shares: the bridge its
    synchronous methods cross, and the projects already resolved."""

    def __init__(self, template: NexusClient, *, weak: bool = False) -> None:
        # A client passed in is held weakly, so that it can be collected (and
        # this record with it) once its owner drops it.
        self._template: Callable[[], NexusClient | None] = (
            weakref.ref(template) if weak else (lambda: template)
        )
        self.lock = threading.Lock()
        self.bridge: _Bridge | None = None
        self.project_ids: dict[str, int] = {}

    def bridged(self) -> _Bridge:
        with self.lock:
            if self.bridge is None:
                self.bridge = _Bridge(self.template().copy())
            return self.bridge

    def template(self) -> NexusClient:
        client = self._template()
        assert client is not None  # an adapter holding this holds the client too
        return client

    def close(self) -> None:
        with self.lock:
            bridge, self.bridge = self.bridge, None
        if bridge is not None:
            bridge.close()

    def abandon(self) -> None:
        """Stops the bridge's loop without waiting (its client is being collected)."""
        bridge, self.bridge = self.bridge, None
        if bridge is not None:
            bridge.loop.call_soon_threadsafe(bridge.loop.stop)


# Adapters given the same client= share its bridge and resolved projects (a
# LangChain history is made per call, by RunnableWithMessageHistory): keyed
# by the client, dropped with it.
_SHARED: weakref.WeakKeyDictionary[NexusClient, _Shared] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def _shared_for(client: NexusClient) -> _Shared:
    with _SHARED_LOCK:
        shared = _SHARED.get(client)
        if shared is None:
            shared = _SHARED[client] = _Shared(client, weak=True)
            weakref.finalize(client, shared.abandon)
        return shared


class AdapterClient:
    """What an adapter calls through: ``await conn.call(fn)`` on the caller's
    loop, ``conn.run(fn)`` from synchronous code; ``fn`` gets a client. A
    refusal comes out as ``conventional_errors.conventional`` makes it.

    Given ``client=``, async calls use it (or, on a loop other than the one
    its channel belongs to, a copy for that loop) and synchronous ones a copy
    on a thread shared by every adapter given that client (ended when the
    client is collected). Given ``target=``, the connection makes its clients (one
    per event loop; channels open on first use) and ``close``/``aclose`` end
    them and its thread."""

    def __init__(
        self,
        *,
        client: NexusClient | None,
        target: str | None,
        api_key: str | None,
        client_options: Mapping[str, Any] | None,
        project: str,
        made_by: str,
    ) -> None:
        if (client is None) == (target is None):
            raise ValueError("pass either client= (a NexusClient) or target= (HOST:PORT)")
        if client is not None and (api_key is not None or client_options):
            raise ValueError(
                "api_key= and client_options= configure the client made from target=;"
                " a client= passed in carries its own"
            )
        if client is not None and not isinstance(client, NexusClient):
            raise ValueError(f"client must be a NexusClient, got {type(client).__name__}")
        self.project = check_label("project", project)
        self._description = f"created by {made_by} on first use"
        self._given = client
        if client is not None:
            self._shared = _shared_for(client)
        else:
            assert target is not None
            # Never called through itself (its channel opens on first use, so
            # it holds none): each loop, and the bridge, gets a copy.
            template = NexusClient(target, api_key=api_key, **dict(client_options or {}))
            self._shared = _Shared(template)
        # One client per event loop for the async methods when this connection
        # made its own: a script may call them under asyncio.run twice.
        self._own: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, NexusClient] = (
            weakref.WeakKeyDictionary()
        )

    def _client_here(self) -> NexusClient:
        loop = asyncio.get_running_loop()
        if self._given is not None:
            opened = self._given.opened_on()
            if opened is None or opened is loop:
                return self._given
            # The given client is another loop's (a framework's sync path may
            # run its async internals on a loop of its own, as LlamaIndex's
            # does): a copy serves this one.
        client = self._own.get(loop)
        if client is None:
            client = self._own[loop] = (self._given or self._shared.template()).copy()
        return client

    # --- calls ---------------------------------------------------------------------

    async def project_id(self, client: NexusClient) -> int:
        """The project's id: found by name in the key's tenant, else created.

        Two first calls at once may both look; find_or_create_project settles
        them on one project, so no lock (which would tie this to one loop)."""
        known = self._shared.project_ids.get(self.project)
        if known:
            return known
        found = await find_or_create_project(client, self.project, description=self._description)
        self._shared.project_ids[self.project] = found
        return found

    async def call(self, fn: Callable[[NexusClient], Awaitable[T]]) -> T:
        """``fn(client)`` on the running loop, with a refusal made conventional."""
        try:
            return await fn(self._client_here())
        except NexusClientError as exc:
            raise conventional(exc) from exc

    def run(self, fn: Callable[[NexusClient], Awaitable[T]]) -> T:
        """``fn(client)`` on the bridge's loop, waited for here."""
        bridge = self._shared.bridged()
        try:
            return bridge.run(fn(bridge.client))
        except NexusClientError as exc:
            raise conventional(exc) from exc

    # --- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Ends the thread of the synchronous methods and its channel, when
        this connection made them (a client passed in is its owner's)."""
        if self._given is None:
            self._shared.close()

    async def aclose(self) -> None:
        """``close``, and the channel this connection opened on the running loop."""
        if self._given is not None:
            return
        await asyncio.to_thread(self._shared.close)
        mine = self._own.pop(asyncio.get_running_loop(), None)
        if mine is not None:
            await mine.close()
