"""SQLite's keyword scores count only the searched scope (issue 44, item 2):
rows outside it change no score and no order, on both of the store's query
shapes (a scope searched inside its own postings, and a large one joined by
session), with and without a time window; and the episode count the scope's
size is read from stays exact as episodes come and go."""

from __future__ import annotations

import time

import pytest

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import MemoryKind, MemoryScope, NewEpisode, Tier, TimeWindow
from nexus_grpc.domain.retrieval.keyword_query import match_expression
from nexus_grpc.store import episodes, memories, sessions
from nexus_grpc.store.sqlite import keyword_search

QUERY = match_expression("kumquat harbour lantern")


def session(conn, name: str) -> int:
    return sessions.SqlSessions(conn).insert(name, name, 0, {}).id


def fill(conn, session_id: int, texts) -> list[int]:
    return [
        episodes.SqlEpisodes(conn).insert(session_id, text, "Noted.", {}, None).id for text in texts
    ]


MINE = (
    "the kumquat crates left the harbour",
    "a lantern by the harbour",
    "kumquat jam again",
    *(f"lunch at noon, table {i}" for i in range(12)),
)


@pytest.mark.parametrize("size", [1, 200], ids=["own postings", "joined by session"])
@pytest.mark.parametrize("windowed", [False, True])
def test_rows_outside_the_scope_change_no_episode_score(conn, size, windowed):
    scope = [session(conn, f"mine {i}") for i in range(size)]
    fill(conn, scope[0], MINE)
    # 200 sessions take the joined shape (keyword_search._scope_first).
    assert keyword_search._scope_first(conn, len(scope)) == (size == 1)
    window = TimeWindow(time.time() - 3600, time.time() + 3600) if windowed else None

    def ranked():
        return episodes.SqlEpisodes(conn).keyword_search(QUERY, scope, 10, window)

    before = ranked()
    assert [score for _, score in before] == sorted((s for _, s in before), reverse=True)
    assert len(before) >= 3 and before[0][1] > 1
    theirs = session(conn, "theirs")
    added = fill(conn, theirs, ["kumquat " * 5 + "harbour"] * 30 + ["lantern"] * 30)
    assert ranked() == before
    for episode_id in added:
        episodes.SqlEpisodes(conn).delete(episode_id)
    assert ranked() == before
    # The scope's own rows do move it: the counts are its own.
    fill(conn, scope[0], ["kumquat harbour"] * 3)
    assert ranked() != before


def memory(text: str, kind: MemoryKind, project_id: int, user_id: str) -> dict:
    return {
        "kind": int(kind), "title": text[:12], "content": text, "tier": int(Tier.LONGTERM),
        "project_id": project_id, "agent_id": "", "user_id": user_id, "session_id": 0,
        "confidence": 1.0, "metadata": "{}",
    }  # fmt: skip


@pytest.fixture
def as_ann_of_a():
    token = tenancy.bind(tenancy.Caller(tenant="a"))
    yield
    tenancy.reset(token)


@pytest.mark.usefixtures("as_ann_of_a")
def test_other_users_and_tenants_change_no_memory_score(conn):
    conn.execute("INSERT INTO projects (id, name, created_at, updated_at) VALUES (1, 'p', 0, 0)")
    for i, text in enumerate(MINE):
        kind = MemoryKind.USER if i % 2 else MemoryKind.PROJECT
        memories.MemoryRows(conn).insert(memory(text, kind, 1, "ann" if i % 2 else ""), None, "a")
    scope = MemoryScope(project_id=1, user_id="ann")

    def ranked():
        return [(m.id, s) for m, s in memories.MemoryRows(conn).keyword_search(QUERY, scope, 10)]

    before = ranked()
    assert len(before) == 3 and before[0][1] > 1
    others = [
        memories.MemoryRows(conn).insert(
            memory(f"kumquat harbour {i}", MemoryKind.USER, p, user), None, t
        )
        for i in range(20)
        for p, user, t in ((1, "bob", "a"), (0, "ann", "b"), (1, "ann", "b"))
    ]
    assert ranked() == before
    for m in others:
        conn.execute("DELETE FROM memories WHERE id = ?", (m.id,))
    assert ranked() == before


def counts(conn) -> dict[int, tuple[int, int]]:
    """Each session's kept count beside its episodes counted."""
    rows = conn.execute(
        "SELECT s.id, s.episode_count, (SELECT count(*) FROM episodes e"
        " WHERE e.session_id = s.id) FROM sessions s"
    )
    return {sid: (kept, real) for sid, kept, real in rows}


def test_a_sessions_episode_count_follows_its_episodes(conn):
    one, two = session(conn, "one"), session(conn, "two")
    ids = fill(conn, one, ["a", "b", "c"])
    episodes.SqlEpisodes(conn).insert_many([NewEpisode(two, t, "", {}, None) for t in ("d", "e")])
    episodes.SqlEpisodes(conn).delete(ids[1])
    conn.execute("UPDATE episodes SET session_id = ? WHERE id = ?", (two, ids[2]))
    assert counts(conn) == {one: (1, 1), two: (3, 3)}
    conn.execute("DELETE FROM sessions WHERE id = ?", (two,))
    assert counts(conn) == {one: (1, 1)}
