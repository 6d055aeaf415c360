"""Keyword search reads each episode with its neighbouring turns, inside its scope."""

from __future__ import annotations

import sqlite3

import pytest

from nexus_grpc.domain.retrieval.keyword_query import match_expression
from nexus_grpc.store import episodes
from nexus_grpc.store.sqlite import migrations
from nexus_grpc.store.sqlite.connection import connect as sqlite_connect

# Sessions 1 and 2 in the shared in-memory database (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("two_sessions")


def add(conn, session_id, user, answer):
    return episodes.SqlEpisodes(conn).insert(session_id, user, answer, {}, None).id


def found(conn, query, scope):
    return [
        i for i, _ in episodes.SqlEpisodes(conn).keyword_search(match_expression(query), scope, 10)
    ]


def test_an_answer_found_by_the_question_in_the_turn_before_it(conn):
    asked = add(conn, 1, "Where did you hike last weekend?", "Up on the ridge.")
    answer = add(conn, 1, "It was lovely, the view was huge.", "Glad you went!")
    add(conn, 2, "Unrelated chatter", "Yes")
    # "ridge" is only in the first episode's answer; the second episode follows it.
    assert found(conn, "ridge", [1]) == [asked, answer]
    # The episode's own words outrank its neighbours'.
    assert found(conn, "lovely view", [1])[0] == answer


def test_deleting_an_episode_rewrites_its_neighbours_context(conn):
    first = add(conn, 1, "one", "alpha")
    middle = add(conn, 1, "two zebra", "beta")
    last = add(conn, 1, "three", "gamma")
    assert set(found(conn, "zebra", [1])) == {first, middle}
    assert set(found(conn, "alpha", [1])) == {first, middle}
    episodes.SqlEpisodes(conn).delete(middle)
    assert found(conn, "zebra", [1]) == []
    # The last episode now follows the first: "alpha" reaches it as context.
    assert set(found(conn, "alpha", [1])) == {first, last}
    assert conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('integrity-check')")


def test_context_never_crosses_sessions(conn):
    add(conn, 1, "kept apart", "walrus")
    other = add(conn, 2, "next door", "nothing here")
    assert found(conn, "walrus", [2]) == []
    assert found(conn, "walrus", [1, 2]) != [other]


@pytest.mark.parametrize("sessions", [1, 200])
def test_small_and_large_scopes_return_only_their_sessions(conn, sessions):
    # 200 sessions takes the large-scope path (postings filtered by session),
    # 1 the scope-first path (the session's own postings).
    for sid in range(3, sessions + 3):
        conn.execute("INSERT INTO sessions (id, external_id, created_at) VALUES (?, ?, 0)",
                     (sid, f"x{sid}"))  # fmt: skip
    mine = add(conn, 1, "the lighthouse keeper", "ok")
    theirs = add(conn, 2, "the lighthouse keeper", "ok")
    scope = [1] + list(range(3, sessions + 3))
    assert found(conn, "lighthouse", scope) == [mine]
    assert found(conn, "lighthouse", [2]) == [theirs]


def test_snippets_mark_matches_in_the_episode_not_its_context(conn):
    add(conn, 1, "[2023] Ann: look up", "Bob: the kestrel landed")
    follower = add(conn, 1, "Ann: anyway", "Bob: later")
    assert found(conn, "kestrel", [1]) == [1, follower]
    matched = episodes.SqlEpisodes(conn).snippets(match_expression("kestrel"), [1, follower])
    assert matched[1] == "Bob: the [kestrel] landed"
    # Found through its context only: its own text, nothing marked.
    assert matched[follower] == "Ann: anyway"
    # A bracket already in the text is not taken for a match.
    assert (
        episodes.SqlEpisodes(conn).snippets(match_expression("look"), [1])[1]
        == "[2023] Ann: [look] up"
    )


def test_migration_fills_context_for_existing_episodes(tmp_path):
    c = sqlite_connect(tmp_path / "old.sqlite3", isolation_level=None)
    migrations.migrate(c, upto=5)
    c.execute("INSERT INTO sessions (id, external_id, created_at) VALUES (1, 's', 0)")
    c.executemany(
        "INSERT INTO episodes (session_id, user_message, ai_response, created_at)"
        " VALUES (1, ?, ?, 0)",
        [("q1", "heron"), ("q2", "a2")],
    )
    assert migrations.migrate(c) == migrations.LATEST_VERSION
    c.row_factory = sqlite3.Row
    assert [r[0] for r in c.execute("SELECT context FROM episodes ORDER BY id")] == [
        "\nq2",
        "heron\n",
    ]
    assert found(c, "heron", [1]) == [1, 2]
