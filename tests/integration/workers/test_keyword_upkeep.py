"""The keyword indexes are merged after writes, and merging changes no result."""

from __future__ import annotations

import pytest

from nexus_grpc.domain.retrieval.keyword_query import match_expression
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.store import episodes, keyword_index
from tests.support import start_harness, wait_until

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
QUERIES = ["alpha bravo", "charlie", "echo lima", "golf hotel india", "kilo"]


def text(i: int) -> str:
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7, 11)) + f" turn{i}"


# Sessions 1 and 2 in the shared in-memory database (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("two_sessions")


def ranked(conn, scope):
    return {
        q: episodes.SqlEpisodes(conn).keyword_search(match_expression(q), scope, 50)
        for q in QUERIES
    }


def test_merging_leaves_few_segments_and_the_same_results(conn):
    # One commit per episode, as live traffic writes them: a segment each.
    for i in range(300):
        conn.execute("BEGIN IMMEDIATE")
        episodes.SqlEpisodes(conn).insert(1 + i % 2, text(i), f"answer {i}", {}, None)
        conn.execute("COMMIT")
    before = keyword_index.segment_count(conn, "episodes_fts")
    results = {scope: ranked(conn, list(scope)) for scope in ((1,), (2,), (1, 2))}
    assert before >= 6  # what automerge alone leaves

    keyword_index.prepare(conn, "episodes_fts")
    steps = 0
    while keyword_index.merge_step(conn, "episodes_fts", 8):
        steps += 1
    after = keyword_index.segment_count(conn, "episodes_fts")

    assert steps >= 1
    assert after <= 2 < before
    assert not keyword_index.merge_step(conn, "episodes_fts", 8)  # nothing left: a no-op
    for scope, expected in results.items():
        got = ranked(conn, list(scope))
        for q in QUERIES:
            assert [i for i, _ in got[q]] == [i for i, _ in expected[q]], (scope, q)
            assert [s for _, s in got[q]] == pytest.approx([s for _, s in expected[q]])


def test_a_step_with_nothing_to_merge_writes_nothing(conn):
    conn.execute("BEGIN IMMEDIATE")
    episodes.SqlEpisodes(conn).insert(1, "one turn", "one answer", {}, None)
    conn.execute("COMMIT")
    keyword_index.prepare(conn, "episodes_fts")
    while keyword_index.merge_step(conn, "episodes_fts", 64):
        pass
    stored = conn.execute("SELECT id, block FROM episodes_fts_data ORDER BY id").fetchall()
    assert not keyword_index.merge_step(conn, "episodes_fts", 64)
    assert conn.execute("SELECT id, block FROM episodes_fts_data ORDER BY id").fetchall() == stored


async def test_the_server_merges_after_live_writes(tmp_path):
    h = await start_harness(tmp_path / "data")
    try:
        upkeep = h.app.keyword_upkeep
        assert upkeep is not None
        session = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
        )
        for i in range(120):
            await h.memory.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(
                    session_id=session.id, user_message=text(i), ai_response=f"answer {i}"
                )
            )

        async def segments() -> int:
            return await h.app.db.read_sql(lambda c: keyword_index.segment_count(c, "episodes_fts"))

        # The loop runs a pass after commits; wait for it to have merged.
        await wait_until(lambda: _merged(upkeep, segments), timeout=30)
        found = [
            hit
            async for hit in h.memory.SearchEpisodes(
                memory_pb2.SearchEpisodesRequest(
                    query="turn7", session_id=session.id, mode=memory_pb2.SEARCH_MODE_KEYWORD
                )
            )
        ]
        # Its own turn first; its neighbours match it through their context.
        assert found[0].episode.user_message == text(7)
    finally:
        await h.close()


async def _merged(upkeep, segments) -> bool:
    return upkeep.steps > 0 and await segments() <= 2
