"""User text becomes a safe, selective FTS5 query."""

from __future__ import annotations

import sqlite3

from nexus_grpc.domain.retrieval.keyword_query import match_expression
from nexus_grpc.store.sqlite.connection import connect as sqlite_connect


def test_syntax_characters_become_quoted_words():
    assert match_expression('"unbalanced (NEAR col:umn* AND') == (
        '"unbalanced" OR "near" OR "col" OR "umn"'
    )
    assert match_expression("?? !!") is None


def test_function_words_are_dropped_unless_nothing_else_is_left():
    assert match_expression("what is the port of the database") == '"port" OR "database"'
    assert match_expression("to be or not to be") == '"to" OR "be" OR "or" OR "not"'


def test_every_expression_is_valid_fts5():
    """FTS5's own syntax in a query is read as words, never as syntax: each
    expression runs, and one that keeps the row's words finds it; a query
    with no word left has no expression (nothing to search for)."""
    conn = sqlite_connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    conn.execute("INSERT INTO t VALUES ('the database port is 5432')")
    found = {}
    for query in ['"', "*", "a:b", "NEAR(", ")(", "AND OR NOT", "what is the port",
                  "port:5432 OR database*"]:  # fmt: skip
        expression = match_expression(query)
        if expression is not None:
            rows = conn.execute("SELECT * FROM t WHERE t MATCH ?", (expression,)).fetchall()
            found[query] = len(rows)
    assert found == {
        "a:b": 0,
        "NEAR(": 0,
        "AND OR NOT": 0,
        "what is the port": 1,
        "port:5432 OR database*": 1,
    }


def test_a_scope_of_more_sessions_than_sqlite_binds_still_searches(tmp_path):
    from nexus_grpc.store import episodes
    from nexus_grpc.store.sqlite.migrations import migrate

    conn = sqlite_connect(tmp_path / "db.sqlite3", isolation_level=None)
    conn.row_factory = sqlite3.Row
    migrate(conn)
    conn.execute("INSERT INTO sessions (id, external_id, created_at) VALUES (40000, 'x', 0)")
    conn.execute("INSERT INTO episodes (session_id, user_message, ai_response, created_at)"
                 " VALUES (40000, 'the zebra migration', '', 0)")  # fmt: skip
    # A stricter SQLite build: 999 bound variables at most.
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    scope = list(range(1, 40001))
    hits = episodes.SqlEpisodes(conn).keyword_search(match_expression("zebra"), scope, 10)
    assert [h[0] for h in hits] == [1]
    assert (
        episodes.SqlEpisodes(conn).keyword_search(match_expression("zebra"), scope[:-1], 10) == []
    )
