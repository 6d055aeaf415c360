"""ImportEpisodes over gRPC: a client stream of episodes written in batches by
each store, answered once with counts, ids and per-item errors (their codes,
and the items the wire cannot decode or convert), the call's refusal past the
limit, the generated client, the store's claim order (import jobs behind live
ones) and the keyword context each store keeps.

The domain's rules of an import (stream order across batches, a resent import
or a request_id twice in one stream replayed, a bad item failing alone, what
a call past the limit keeps) are tested on the fakes in
tests/unit/test_import_rules.py."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client import NexusClient
from nexus_grpc.domain import episode_import
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.store import jobs

# Runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

# 8 May 2023, 13:56 UTC.
BASE = 1_683_554_160
IMPORT = "/nexus.memory.v1.MemoryService/ImportEpisodes"


def ts(seconds: float) -> Timestamp:
    t = Timestamp()
    t.FromNanoseconds(int(seconds * 1e9))
    return t


def item(session_id: int, i: int, **over) -> memory_pb2.ImportEpisodesRequest:
    fields = dict(
        session_id=session_id,
        user_message=f"question {i}",
        ai_response=f"answer {i}",
        request_id=f"r{i}",
        occur_time=ts(BASE + 30 * i),
    )
    fields.update(over)
    return memory_pb2.ImportEpisodesRequest(episode=memory_pb2.CreateEpisodeRequest(**fields))


async def stream(items):
    for it in items:
        yield it


async def count(h, sql: str = "SELECT COUNT(*) FROM episodes") -> int:
    return await h.app.db.read_sql(lambda c: c.execute(sql).fetchone()[0])


async def session(h, project_id: int = 0) -> int:
    s = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project_id))
    )
    return s.id


async def test_import_writes_every_episode_in_stream_order_with_its_time(harness):
    h = harness
    a, b = await session(h), await session(h)
    # 600 items: three batches, the last one partial, across two sessions.
    items = [item(a if i % 2 == 0 else b, i) for i in range(600)]
    answer = await h.memory.ImportEpisodes(stream(items))
    assert (answer.received, answer.created, answer.replayed, answer.failed) == (600, 600, 0, 0)
    assert len(answer.episode_ids) == 600 and len(set(answer.episode_ids)) == 600
    assert not answer.errors
    assert await count(h) == 600
    # Each id is the episode of its item, with its occur_time.
    for i in (0, 1, 255, 256, 511, 599):
        ep = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=answer.episode_ids[i]))
        assert ep.user_message == f"question {i}"
        assert ep.session_id == (a if i % 2 == 0 else b)
        assert ep.occur_time.ToSeconds() == BASE + 30 * i
    listed = await h.memory.ListEpisodes(
        memory_pb2.ListEpisodesRequest(session_id=a, page_size=500)
    )
    assert len(listed.episodes) == 300


async def test_a_bad_item_is_reported_and_written_nothing_while_the_others_go_on(harness):
    h = harness
    a = await session(h)
    await h.memory.ImportEpisodes(stream([item(a, 7)]))  # r7 is taken
    before = await count(h)
    items = [
        item(a, 0),
        item(a, 1, request_id=""),  # required here
        item(a, 2, user_message="  "),
        item(999_999, 3),
        item(a, 4, occur_time=ts(4_102_444_800)),  # 2100: in the future
        item(a, 5, occur_time=Timestamp(seconds=300_000_000_000)),  # out of Timestamp's range
        item(a, 6, user_message="different text", request_id="r7"),
        memory_pb2.ImportEpisodesRequest(),  # no episode at all
        item(a, 8, request_id=" r8"),
        item(a, 9),
    ]
    answer = await h.memory.ImportEpisodes(stream(items))
    assert (answer.received, answer.created, answer.replayed, answer.failed) == (10, 2, 0, 8)
    assert await count(h) == before + 2
    ok = [i for i, eid in enumerate(answer.episode_ids) if eid]
    assert ok == [0, 9]
    errors = {e.index: e for e in answer.errors}
    assert sorted(errors) == [1, 2, 3, 4, 5, 6, 7, 8]
    expect = {
        1: (grpc.StatusCode.INVALID_ARGUMENT, "request_id"),
        2: (grpc.StatusCode.INVALID_ARGUMENT, "user_message"),
        3: (grpc.StatusCode.NOT_FOUND, "session 999999"),
        4: (grpc.StatusCode.INVALID_ARGUMENT, "occur_time"),
        5: (grpc.StatusCode.INVALID_ARGUMENT, "occur_time"),
        6: (grpc.StatusCode.ALREADY_EXISTS, "request_id 'r7'"),
        7: (grpc.StatusCode.INVALID_ARGUMENT, "episode is required"),
        8: (grpc.StatusCode.INVALID_ARGUMENT, "request_id"),
    }
    for index, (code, words) in expect.items():
        assert errors[index].code == code.value[0], (index, errors[index])
        assert words in errors[index].message, (index, errors[index].message)
    assert errors[6].request_id == "r7"
    # A rejected item queued no job either: every episode job names a stored episode.
    orphans = await count(
        h,
        "SELECT COUNT(*) FROM jobs WHERE kind IN ('index:episodes', 'extract:episode')"
        " AND target_id NOT IN (SELECT id FROM episodes)",
    )
    assert orphans == 0


async def test_undecodable_bytes_are_that_items_error(harness):
    h = harness
    a = await session(h)
    good = item(a, 0).SerializeToString()
    call = h.channel.stream_unary(
        IMPORT,
        request_serializer=lambda raw: raw,
        response_deserializer=memory_pb2.ImportEpisodesResponse.FromString,
    )
    answer = await call(stream([good, b"\xff\xff\xff", item(a, 1).SerializeToString()]))
    assert (answer.created, answer.failed) == (2, 1)
    assert answer.errors[0].index == 1
    assert answer.errors[0].code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "not a valid ImportEpisodesRequest" in answer.errors[0].message


async def test_more_than_the_limit_stores_what_came_before_and_says_so(harness, monkeypatch):
    """The call's refusal, by its code, after what came before it was stored
    (the rule itself, at the real limit's shape: tests/unit/test_import_rules.py)."""
    h = harness
    monkeypatch.setattr(episode_import, "MAX_IMPORT_EPISODES", 2)
    a = await session(h)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.memory.ImportEpisodes(stream([item(a, i) for i in range(5)]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "at most 2 episodes per ImportEpisodes call" in err.value.details()
    assert "the first 2 were stored" in err.value.details()
    assert await count(h) == 2  # item 2 (the 3rd) and after: not written


async def test_import_jobs_wait_behind_live_traffic(harness):
    h = harness
    # No worker claims anything during the test: the claim order is read directly.
    for worker in h.app.workers:
        await worker.stop()
    a, live_session = await session(h), await session(h)
    imported = await h.memory.ImportEpisodes(stream([item(a, i) for i in range(40)]))
    assert imported.created == 40
    live = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=live_session, user_message="live", request_id="x"
        )
    )
    for kind in (jobs.INDEX_EPISODE, jobs.EXTRACT_EPISODE):
        claimed = await h.app.db.write_sql(lambda c, k=kind: jobs.SqlJobs(c).claim(k, 5))
        if kind == jobs.INDEX_EPISODE and h.app.inline_vectors is not None:
            # PostgreSQL with pgvector: the live episode's vector was written
            # in its own transaction, so it has no index job to wait behind
            # anything; the import's (bulk) embeddings go through their jobs.
            assert {j.target_id for j in claimed} == set(imported.episode_ids[:5])
            continue
        # The live episode's job is in the first claim although it was queued
        # last (a claim is one batch: PostgreSQL's returns it in id order).
        assert {j.target_id for j in claimed} == {live.id, *imported.episode_ids[:4]}
    # Live work on an imported episode is live: its job moves ahead of the import's.
    target = imported.episode_ids[-1]
    await h.app.db.write_sql(lambda c: jobs.SqlJobs(c).enqueue(jobs.INDEX_EPISODE, [target]))
    claimed = await h.app.db.write_sql(lambda c: jobs.SqlJobs(c).claim(jobs.INDEX_EPISODE, 1))
    assert [j.target_id for j in claimed] == [target]


async def test_the_generated_client_streams_messages_or_mappings(harness):
    h = harness
    a = await session(h)
    async with NexusClient(h.target, retry=None) as client:
        answer = await client.import_episodes(
            [
                item(a, 0),
                {"episode": {"session_id": a, "user_message": "mapped", "request_id": "m1"}},
            ]
        )
    assert (answer.created, answer.failed) == (2, 0)
    ep = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=answer.episode_ids[1]))
    assert ep.user_message == "mapped"


async def test_imported_turns_get_the_same_keyword_context_as_created_ones(harness, store_kind):
    h = harness
    a, b, c = await session(h), await session(h), await session(h)
    turns = [
        (f"user turn {i} " + "x" * (i * 300), f"ai turn {i} " + "y" * (i * 250)) for i in range(7)
    ]
    for user, ai in turns:
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=a, user_message=user, ai_response=ai)
        )

    def turn(sid, i):
        return item(sid, i, user_message=turns[i][0], ai_response=turns[i][1])

    # Two calls (so the first call's last turn gains a successor), sessions interleaved.
    await h.memory.ImportEpisodes(stream([turn(b, 0), turn(c, 0), turn(b, 1), turn(b, 2)]))
    await h.memory.ImportEpisodes(
        stream([turn(c, 1), turn(b, 3), *[turn(s, i) for i in range(4, 7) for s in (b,)]])
    )
    await h.memory.ImportEpisodes(stream([turn(c, i) for i in range(2, 7)]))

    async def contexts(sid):
        return await h.app.db.read_sql(
            lambda conn: [
                r[0]
                for r in conn.execute(
                    "SELECT context FROM episodes WHERE session_id = ? ORDER BY id", (sid,)
                )
            ]
        )

    created = await contexts(a)
    assert len(created) == 7 and "user turn 3" in created[2]
    assert await contexts(b) == created
    assert await contexts(c) == created
    # The keyword index holds exactly what the rows say (FTS5 checks its
    # external-content index against the rows, and raises when they differ;
    # PostgreSQL's tsvector is generated from the row, so it cannot differ).
    if store_kind == "sqlite":
        await h.app.db.write_sql(
            lambda conn: conn.execute(
                "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1)"
            )
        )
    hits = [
        hit.episode.id
        async for hit in h.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(
                query="turn 5", session_id=c, mode=memory_pb2.SEARCH_MODE_KEYWORD
            )
        )
    ]
    assert hits
