"""WatchExtractions over gRPC: live events from the extraction worker,
create-then-watch, many watchers at once, a refusal of each kind by its code,
cancellation and shutdown; and the whole path through the server.

The domain's rules of a watch (what each filter and the caller's tenant let
through, replay after a cursor then live with no gap or duplicate, a past
extraction's event replayed, every refusal, a closed broadcaster ending a
waiting watch) are tested on the fakes in tests/unit/test_watch_rules.py."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.graph_support import (
    ALICE,
    EMPTY,
    expect_status,
    new_episode,
    new_project,
    new_session,
    start_graph_harness,
)
from tests.ollama_stub import OllamaStub, Reply
from tests.support import start_harness, take, wait_until

# Every test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND


# The conftest's ``stub`` answers chats no test scripted with this.
STUB_DEFAULT_REPLY = EMPTY


def watch(h, **kw):
    return h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(**kw))


async def test_live_events_arrive_for_the_filtered_session_only(gh):
    s1, s2 = await new_session(gh), await new_session(gh)
    call = watch(gh, session_id=s1.id)
    other = await new_episode(gh, s2.id)
    mine = [await new_episode(gh, s1.id, f"m{i}") for i in range(2)]
    events = await take(call, 2)
    # Extraction runs llm_concurrency episodes at once: completion order varies.
    assert sorted(e.episode_id for e in events) == [ep.id for ep in mine]
    assert all(
        e.session_id == s1.id and e.status == graph_pb2.EXTRACTION_STATUS_DONE for e in events
    )
    assert events[0].event_id < events[1].event_id and events[0].time.seconds > 0
    call.cancel()
    # The other session's episode was extracted too, just not sent to this watcher.
    all_events = await take(watch(gh), 3)
    assert other.id in {e.episode_id for e in all_events}


async def test_create_then_watch_never_hangs(gh, stub):
    stub.default = Reply.of(ALICE)
    s = await new_session(gh)
    ep = await new_episode(gh, s.id)

    async def done():
        e = await gh.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ep.id))
        return e.extraction_state == memory_pb2.JOB_STATE_DONE

    await wait_until(done)  # extraction finished before anyone watched
    [event] = await take(watch(gh, episode_id=ep.id), 1, limit=2)
    assert event.episode_id == ep.id and len(event.entities) == 2


async def test_many_watchers_on_fresh_episodes_all_get_their_event(gh):
    s = await new_session(gh)
    episodes = [await new_episode(gh, s.id, f"e{i}") for i in range(10)]
    # Each watcher subscribes while its episode may be pending, running or done.
    results = await asyncio.gather(*(take(watch(gh, episode_id=ep.id), 1) for ep in episodes))
    assert [r[0].episode_id for r in results] == [ep.id for ep in episodes]


async def test_watch_errors(gh):
    """A refusal of each kind, by its code (every refusal: tests/unit/test_watch_rules.py)."""
    s = await new_session(gh)
    cases = [
        (dict(episode_id=1, session_id=s.id), INVALID, "at most one"),
        (dict(session_id=405), NOT_FOUND, "405"),
    ]
    for kw, code, text in cases:
        await expect_status(take(watch(gh, **kw), 1), code, text)


async def test_cancellation_ends_the_stream_and_the_server_keeps_serving(gh):
    calls = [watch(gh) for _ in range(5)]
    events = gh.app.graph_events

    async def watching(n: int) -> bool:
        return events.watchers == n

    # Cancel once all five are open on the server (each holds a watcher slot
    # while it waits on the broadcaster), not after a guessed pause.
    await wait_until(lambda: watching(5))
    for call in calls:
        call.cancel()
    for call in calls:
        with pytest.raises(asyncio.CancelledError):
            await call.read()
    await wait_until(lambda: watching(0))  # the server let go of every one
    s = await new_session(gh)
    ep = await new_episode(gh, s.id)
    [event] = await take(watch(gh, episode_id=ep.id), 1)
    assert event.episode_id == ep.id


async def test_shutdown_ends_open_streams(tmp_path, stub, store_settings):
    h = await start_graph_harness(tmp_path / "data", stub, **store_settings)
    call = watch(h)
    s = await new_session(h)
    ep = await new_episode(h, s.id)
    [event] = await take(call, 1)  # the stream is up and now waiting
    assert event.episode_id == ep.id
    h.app.graph_events.close()  # what a graceful shutdown does first
    assert await asyncio.wait_for(call.read(), 5) is grpc.aio.EOF
    assert await call.code() == grpc.StatusCode.OK
    await asyncio.wait_for(h.close(), 10)


async def test_server_stop_with_open_streams_does_not_hang(tmp_path, stub, store_settings):
    h = await start_graph_harness(tmp_path / "data", stub, **store_settings)
    calls = [watch(h) for _ in range(3)]
    s = await new_session(h)
    await new_episode(h, s.id)
    for call in calls:
        await take(call, 1)
    await asyncio.wait_for(h.running.stop(None), 10)
    # Shutdown closes the broadcaster first, so each stream ends cleanly.
    for call in calls:
        end = await asyncio.wait_for(call.read(), 5)
        assert end is grpc.aio.EOF
        assert await call.code() == grpc.StatusCode.OK
    await h.channel.close()


async def test_end_to_end_episode_to_event_to_neighborhood(tmp_path):
    with OllamaStub() as stub:
        stub.add_rule(
            Reply.of(
                {
                    "entities": [
                        {"name": "Alice", "type": "person", "notes": "engineer"},
                        {"name": "Initech", "type": "organization", "notes": None},
                        {"name": "Austin", "type": "place", "notes": None},
                    ],
                    "relationships": [
                        {"from": "Alice", "to": "Initech", "label": "works at", "notes": None},
                        {"from": "Initech", "to": "Austin", "label": "located_in", "notes": None},
                    ],
                }
            ),
            contains="Alice",
        )
        h = await start_harness(tmp_path / "data", ollama_url=stub.url)
        try:
            p = await new_project(h)
            s = await new_session(h, p.id)
            call = watch(h, project_id=p.id)
            ep = await new_episode(h, s.id, "Alice works at Initech in Austin", "Noted.")
            [event] = await take(call, 1)
            call.cancel()
            assert event.episode_id == ep.id and event.status == graph_pb2.EXTRACTION_STATUS_DONE
            alice = next(e for e in event.entities if e.name == "Alice")
            hood = await h.graph.GetNeighborhood(
                graph_pb2.GetNeighborhoodRequest(entity_id=alice.id, depth=2)
            )
            assert {n.name for n in hood.nodes} == {"Alice", "Initech", "Austin"}
            assert sorted(e.label for e in hood.edges) == ["located_in", "works_at"]
            one = await h.graph.GetNeighborhood(
                graph_pb2.GetNeighborhoodRequest(entity_id=alice.id)
            )
            assert {n.name for n in one.nodes} == {"Alice", "Initech"}
        finally:
            await h.close()
