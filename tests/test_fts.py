"""User text becomes a safe, selective FTS5 query."""

from __future__ import annotations

import sqlite3

from nexus_grpc.domain.fts import match_expression


def test_syntax_characters_become_quoted_words():
    assert match_expression('"unbalanced (NEAR col:umn* AND') == (
        '"unbalanced" OR "near" OR "col" OR "umn"'
    )
    assert match_expression("?? !!") is None


def test_function_words_are_dropped_unless_nothing_else_is_left():
    assert match_expression("what is the port of the database") == '"port" OR "database"'
    assert match_expression("to be or not to be") == '"to" OR "be" OR "or" OR "not"'


def test_every_expression_is_valid_fts5():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    conn.execute("INSERT INTO t VALUES ('the database port is 5432')")
    for query in ['"', "*", "a:b", "NEAR(", ")(", "AND OR NOT", "what is the port"]:
        expression = match_expression(query)
        if expression is not None:
            conn.execute("SELECT * FROM t WHERE t MATCH ?", (expression,)).fetchall()
