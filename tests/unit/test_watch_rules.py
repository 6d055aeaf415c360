"""WatchExtractions' rules (Graph.watch, domain/graph.py), on the fakes of
tests/fakes.py and an in-process EventBroadcaster: which events a filter
lets through (episode, session, project, the caller's tenant), replay after
a cursor then live ones with no gap and no duplicate, an episode's events
replayed to a watcher that comes after its extraction, the refusals of a bad
request, and a closed broadcaster ending a waiting watch.

What a client sees of it over gRPC (live events from the extraction worker,
the status codes, cancellation, the server's shutdown, the whole path from an
episode to its neighbourhood) is tests/e2e/service/test_watch.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterator

import pytest

from nexus_grpc.core import tenancy
from nexus_grpc.core.events import EventBroadcaster
from nexus_grpc.core.records import ExtractionEvent
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import graph as graph_module
from nexus_grpc.domain.graph import Graph
from nexus_grpc.errors import InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork

DONE = 2  # graph_pb2.EXTRACTION_STATUS_DONE


class Broadcaster(EventBroadcaster):
    """The broadcaster, saying when a watcher has begun to wait on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()

    async def wait(self, event: asyncio.Event, timeout: float) -> None:  # noqa: ASYNC109
        self.waiting.set()
        await super().wait(event, timeout)


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def events() -> Broadcaster:
    return Broadcaster()


@pytest.fixture
def graph(uow: FakeUnitOfWork, events: Broadcaster, monkeypatch: pytest.MonkeyPatch) -> Graph:
    # No re-read without a wake-up while a test runs: a lost wake-up would hang
    # the watch (and the test's time-out fails it) instead of being covered by the poll.
    monkeypatch.setattr(graph_module, "WATCH_POLL_SECONDS", 3600.0)
    return Graph(FakeDatabase(uow), JobSignals(), None, None, events)  # type: ignore[arg-type]


def session(uow: FakeUnitOfWork, project_id: int = 0, tenant: str = "default") -> int:
    return uow.sessions.insert(f"s{len(uow.sessions.rows)}", "", project_id, {}, tenant).id


def extracted(uow: FakeUnitOfWork, session_id: int, text: str = "hi") -> tuple[int, int]:
    """An episode of ``session_id`` and the event of its extraction."""
    episode = uow.episodes.insert(session_id, text, "ok", {}, None)
    project_id = uow.sessions.rows[session_id].project_id
    return episode.id, uow.events.insert(episode.id, session_id, project_id, DONE)


async def waiting(events: Broadcaster) -> None:
    """Until a watcher has read all there is and waits on ``events``."""
    async with asyncio.timeout(5):
        await events.waiting.wait()


async def take(stream: AsyncGenerator[ExtractionEvent, None], n: int) -> list[ExtractionEvent]:
    async with asyncio.timeout(5):
        return [await anext(stream) for _ in range(n)]


async def test_a_session_filter_hears_only_that_sessions_events_in_order(uow, graph):
    s1, s2 = session(uow), session(uow)
    extracted(uow, s2)
    mine = [extracted(uow, s1, f"m{i}")[0] for i in range(2)]
    watch = graph.watch(0, s1, 0, 0)
    events = await take(watch, 2)
    await watch.aclose()
    assert [e.episode_id for e in events] == mine
    assert all(e.session_id == s1 and e.status == DONE for e in events)
    assert events[0].id < events[1].id and events[0].created_at > 0
    # The other session's episode has its event too, just not sent to that watcher.
    everyone = graph.watch(0, 0, 0, 0)
    assert len(await take(everyone, 3)) == 3
    await everyone.aclose()


async def test_a_project_filter_hears_only_that_projects_events(uow, graph):
    p1 = uow.projects.insert({"name": "one"}).id
    p2 = uow.projects.insert({"name": "two"}).id
    s1, s2 = session(uow, p1), session(uow, p2)
    extracted(uow, s1)
    ep2, _ = extracted(uow, s2)
    extracted(uow, s1)
    watch = graph.watch(0, 0, p2, 0)
    [event] = await take(watch, 1)
    # Nothing more of p2: the next read waits (the broadcaster is told of it).
    pending = asyncio.ensure_future(anext(watch))
    await waiting(graph.events)
    assert not pending.done()
    pending.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pending
    await watch.aclose()
    assert (event.episode_id, event.project_id) == (ep2, p2)


async def test_a_cursor_replays_what_came_after_it_then_goes_live_without_gap_or_duplicate(
    uow, graph, events
):
    s = session(uow)
    first = [extracted(uow, s, f"old {i}")[0] for i in range(3)]
    replay = graph.watch(0, s, 0, 0)
    replayed = await take(replay, 3)
    await replay.aclose()
    assert [e.episode_id for e in replayed] == first
    assert [e.id for e in replayed] == sorted(e.id for e in replayed)

    watch = graph.watch(0, s, 0, replayed[0].id)
    resumed = await take(watch, 2)  # what was missed: no gap
    assert [e.id for e in resumed] == [e.id for e in replayed[1:]]
    nxt = asyncio.ensure_future(anext(watch))
    await waiting(events)  # caught up, and waiting on the broadcaster
    live, _ = extracted(uow, s, "new")
    events.notify()  # what the writer does after its commit
    async with asyncio.timeout(5):
        event = await nxt  # then live: no duplicate of the replayed ones
    await watch.aclose()
    assert event.episode_id == live and event.id > resumed[-1].id


async def test_an_episode_watched_after_its_extraction_gets_its_event(uow, graph):
    s = session(uow)
    episode_id, event_id = extracted(uow, s)
    watch = graph.watch(episode_id, 0, 0, 0)
    [event] = await take(watch, 1)
    await watch.aclose()
    assert (event.id, event.episode_id) == (event_id, episode_id)
    # A deleted episode's events can still be replayed.
    del uow.episodes.rows[episode_id]
    again = graph.watch(episode_id, 0, 0, 0)
    assert [e.id for e in await take(again, 1)] == [event_id]
    await again.aclose()


@pytest.mark.parametrize(
    ("request_", "error", "words"),
    [
        ({"episode_id": 1, "session_id": 1}, InvalidArgument, "at most one"),
        ({"episode_id": -1}, InvalidArgument, "episode_id"),
        ({"after_event_id": -5}, InvalidArgument, "after_event_id"),
        ({"episode_id": 404}, NotFound, "404"),
        ({"session_id": 405}, NotFound, "405"),
        ({"project_id": 406}, NotFound, "406"),
    ],
)
async def test_a_bad_watch_is_refused_by_name(uow, graph, request_, error, words):
    session(uow)
    call = {"episode_id": 0, "session_id": 0, "project_id": 0, "after_event_id": 0, **request_}
    watch = graph.watch(**call)
    with pytest.raises(error) as refused:
        await anext(watch)
    assert words in str(refused.value)


@pytest.fixture
def as_team() -> Iterator[None]:
    token = tenancy.bind(tenancy.Caller("team"))
    yield
    tenancy.reset(token)


async def test_a_watcher_hears_only_its_tenants_events(uow, graph, as_team):
    theirs, ours = session(uow), session(uow, tenant="team")
    extracted(uow, theirs)
    mine, _ = extracted(uow, ours)
    watch = graph.watch(0, 0, 0, 0)
    assert [e.episode_id for e in await take(watch, 1)] == [mine]
    await watch.aclose()
    # Another tenant's session reads as missing.
    refused = graph.watch(0, theirs, 0, 0)
    with pytest.raises(NotFound):
        await anext(refused)


async def test_a_closed_broadcaster_ends_a_waiting_watch(uow, graph, events):
    s = session(uow)
    extracted(uow, s)
    watch = graph.watch(0, 0, 0, 0)
    await take(watch, 1)
    end = asyncio.ensure_future(anext(watch))
    await waiting(events)
    events.close()  # what a graceful shutdown does first
    with pytest.raises(StopAsyncIteration):
        async with asyncio.timeout(5):
            await end
