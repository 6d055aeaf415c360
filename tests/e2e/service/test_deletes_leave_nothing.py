"""What is deleted is not replayed and not left behind (issue 44 item 3,
issue 45 item 4), on both stores: WatchExtractions replayed from event 0
after DeleteMemory, DeleteEpisode, DeleteSession and DeleteProject holds no
word of what went; a session summary that quoted a deleted episode is
removed and queued again; an episode's deletion takes the graph evidence it
gave; DeleteMemory with erase_history takes the history now; events past
their retention are neither replayed nor kept; a restore of an export taken
before a user was forgotten leaves that user out."""

from __future__ import annotations

import time

import grpc
import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.forgetting import EMPTY, World, every_text, files_of, tail
from tests.support import Harness, erasure_done, take, wait_until

BOTH_STORES = True
STUB_DEFAULT_REPLY = EMPTY


@pytest.fixture
async def world(gh, stub) -> World:
    w = World(gh, stub, seed=44)
    await w.build()
    return w


async def replay(h: Harness) -> str:
    """Every event a replay from 0 returns: as many as the store holds (the
    watch goes on live after them; the store's count says where that is)."""
    n = await h.app.db.read_sql(
        lambda c: c.execute("SELECT COUNT(*) FROM extraction_events").fetchone()[0]
    )
    if n == 0:
        return ""
    call = h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(after_event_id=0))
    try:
        return "\n".join(str(e) for e in await take(call, n, 30))
    finally:
        call.cancel()


async def memories_of(h: Harness, project_id: int, user_id: str):
    page = await h.memory.ListMemories(
        memory_pb2.ListMemoriesRequest(
            scope=memory_pb2.MemoryScope(project_id=project_id, user_id=user_id),
            page_size=100,
        )
    )
    return list(page.memories)


async def test_a_deleted_memory_is_not_replayed_and_erase_history_takes_its_history(
    world: World, store_kind
):
    h = world.h
    alice = world.words["alice"]
    assert alice["formed_user"] in await replay(h)
    [formed] = [
        m for m in await memories_of(h, world.project, "alice") if alice["formed_user"] in m.content
    ]
    await h.memory.DeleteMemory(memory_pb2.DeleteMemoryRequest(id=formed.id, user_id="alice"))
    replayed = await replay(h)
    assert alice["formed_user"] not in replayed
    # Kept without its content, said so: the operation stays, its words go.
    assert "(erased)" in replayed
    # Its history stays readable for the retention (the default delete) ...
    history = await h.memory.ListMemoryHistory(
        memory_pb2.ListMemoryHistoryRequest(memory_id=formed.id, user_id="alice")
    )
    assert history.revisions
    # ... unless erase_history: then the memory and every version go now.
    [direct] = [
        m for m in await memories_of(h, world.project, "alice") if alice["memory"] in m.content
    ]
    await h.memory.DeleteMemory(
        memory_pb2.DeleteMemoryRequest(id=direct.id, user_id="alice", erase_history=True)
    )
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.ListMemoryHistory(
            memory_pb2.ListMemoryHistoryRequest(memory_id=direct.id, user_id="alice")
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert alice["memory"] not in await every_text(h)
    if store_kind == "sqlite":
        await h.app.scrubber.scrub(time.time())
        data = h.app.settings.data_dir
        assert not any(tail(alice["memory"]) in b for b in files_of(data).values())


async def test_a_deleted_episode_takes_its_events_evidence_and_the_summary_quoting_it(
    world: World,
):
    h = world.h
    alice, bob = world.words["alice"], world.words["bob"]
    session = world.sessions["alice"]
    episodes = await h.memory.ListEpisodes(memory_pb2.ListEpisodesRequest(session_id=session))
    [spoken] = [e for e in episodes.episodes if alice["episode"] in e.user_message]
    summaries_before = await h.app.db.read_sql(
        lambda c: c.execute(
            "SELECT COUNT(*) FROM summaries WHERE session_id = ?", (session,)
        ).fetchone()[0]
    )
    assert summaries_before == 1
    await h.memory.DeleteEpisode(memory_pb2.DeleteEpisodeRequest(id=spoken.id))
    replayed = await replay(h)
    assert alice["entity"] not in replayed and alice["episode"] not in replayed
    assert bob["entity"] in replayed
    text = await every_text(h)
    # Her person (only her episode named it), its fact and evidence go;
    # the summary that quoted the episode goes, and is queued again.
    for path in ("episode", "reply", "entity", "label_notes", "summary"):
        assert alice[path] not in text, path

    async def summarised_again() -> bool:
        rows = await h.app.db.read_sql(
            lambda c: [
                r[0]
                for r in c.execute("SELECT content FROM summaries WHERE session_id = ?", (session,))
            ]
        )
        return len(rows) == 1 and alice["summary"] not in rows[0]

    # Queued again, and written from what is left.
    await wait_until(summarised_again, timeout=30)
    # What she stored or formed stays hers: a delete of one episode is not a
    # forgetting of its user.
    assert alice["memory"] in text and alice["formed_user"] in text
    for path in ("episode", "entity", "summary"):
        assert bob[path] in text, path


async def test_deleted_sessions_and_projects_are_not_replayed(world: World):
    h = world.h
    alice, bob = world.words["alice"], world.words["bob"]
    await h.memory.DeleteSession(memory_pb2.DeleteSessionRequest(id=world.sessions["alice"]))
    replayed = await replay(h)
    assert alice["entity"] not in replayed and bob["entity"] in replayed
    deleted = await h.memory.DeleteProject(memory_pb2.DeleteProjectRequest(id=world.project))
    await erasure_done(h, deleted.erasure_id)
    assert await replay(h) == ""
    text = await every_text(h)
    assert not any(word in text for words in world.words.values() for word in words.values())


async def test_events_past_their_retention_are_neither_replayed_nor_kept(world: World):
    h = world.h
    old = await h.app.db.read_sql(
        lambda c: c.execute("SELECT MAX(id) FROM extraction_events").fetchone()[0]
    )
    # Written 31 days ago, as far as the store knows (the retention is 30).
    await h.app.db.write_sql(
        lambda c: c.execute("UPDATE extraction_events SET created_at = created_at - 31 * 86400")
    )
    fresh = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=world.sessions["bob"], user_message="one more", ai_response="ok"
        )
    )
    call = h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(after_event_id=0))
    try:
        [first] = await take(call, 1, 30)
    finally:
        call.cancel()
    # The replay from 0 starts after every old event: with the fresh one.
    assert first.event_id > old and first.episode_id == fresh.id
    assert await h.app.storage_upkeep.purge_events(time.time()) >= 1
    left = await h.app.db.read_sql(
        lambda c: c.execute(
            "SELECT COUNT(*) FROM extraction_events WHERE id <= ?", (old,)
        ).fetchone()[0]
    )
    assert left == 0


async def test_a_restore_of_an_export_taken_before_leaves_the_forgotten_user_out(world: World):
    h = world.h
    export = [
        r
        async for r in h.memory.ExportProject(
            memory_pb2.ExportProjectRequest(project_id=world.project)
        )
    ]
    started = await h.memory.ForgetUser(memory_pb2.ForgetUserRequest(user_id="alice"))
    await erasure_done(h, started.id)
    # The project is restored where it is gone (a restore keeps its names and ids).
    deleted = await h.memory.DeleteProject(memory_pb2.DeleteProjectRequest(id=world.project))
    await erasure_done(h, deleted.erasure_id)
    restored = await h.memory.RestoreProject(
        iter(memory_pb2.RestoreProjectRequest(record=r) for r in export)
    )
    assert restored.erased_records > 0
    text = await every_text(h)
    left = [p for p, w in world.words["alice"].items() if w in text]
    assert not left, left
    bob = world.words["bob"]
    for path in ("episode", "reply", "imported", "memory", "formed_user", "entity"):
        assert bob[path] in text, path

    async def nothing_indexed_of_alice() -> bool:
        status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
        return all(q.pending == 0 for q in status.queues if q.kind.startswith("index:"))

    await wait_until(nothing_indexed_of_alice, timeout=30)
