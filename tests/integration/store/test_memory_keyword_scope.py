"""Memory keyword search walks only its owners' postings, for any user id."""

from __future__ import annotations

import pytest

from nexus_grpc.domain.memory_visibility import MemoryScope
from nexus_grpc.domain.retrieval.keyword_query import match_expression
from nexus_grpc.store import memories

USERS = ["ann", "Zoë Ångström", "bob@example.com", "e", "ed", "u616e6e"]


@pytest.fixture(autouse=True)
def falcons(conn):
    """Project 1, and a memory saying "falcon" for it and for each user."""
    conn.execute("INSERT INTO projects (id, name, created_at, updated_at) VALUES (1, 'p', 0, 0)")
    rows = [(2, "t", f"{u} keeps a falcon", 3, 1, u) for u in USERS]
    rows.append((1, "t", "the project keeps a falcon", 3, 1, ""))
    conn.executemany(
        "INSERT INTO memories (kind, title, content, tier, project_id, user_id, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, ?, ?, 0, 0)",
        rows,
    )


@pytest.mark.parametrize("user", USERS)
def test_each_user_finds_their_own_and_the_projects_memories_only(conn, user):
    scope = MemoryScope(project_id=1, user_id=user)
    found = memories.MemoryRows(conn).keyword_search(match_expression("falcon"), scope, 50)
    assert sorted((m.kind, m.user_id) for m, _ in found) == [(1, ""), (2, user)]


def test_a_renamed_memory_is_found_by_its_new_words_only(conn):
    conn.execute("UPDATE memories SET content = 'ann keeps an owl' WHERE user_id = 'ann'")
    scope = MemoryScope(project_id=1, user_id="ann")
    owl = memories.MemoryRows(conn).keyword_search(match_expression("owl"), scope, 50)
    assert [m.user_id for m, _ in owl] == ["ann"]
    falcon = memories.MemoryRows(conn).keyword_search(match_expression("falcon"), scope, 50)
    assert [m.user_id for m, _ in falcon] == [""]
    assert conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
