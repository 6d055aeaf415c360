"""Which of some rows a keyword query matches at all, however they would rank
(explain's reason for a hit the keyword path did not rank: issue 47, item
12), the same on both stores: stems, an episode's neighbouring turns, a
memory's title and content."""

from __future__ import annotations

import pytest

from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.domain.retrieval.keyword_query import match_expression
from nexus_grpc.store.postgres.database import PostgresDatabase
from nexus_grpc.store.sqlite.database import Database


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(request, tmp_path):
    if request.param == "sqlite":
        database = Database(tmp_path / "matching.db")
    else:
        database = PostgresDatabase(request.getfixturevalue("pg_url"))
    await database.open()
    yield database
    await database.close()


def memory(text: str, project_id: int) -> dict:
    return {
        "kind": int(MemoryKind.PROJECT), "title": text[:12], "content": text,
        "tier": int(Tier.LONGTERM), "project_id": project_id, "agent_id": "", "user_id": "",
        "session_id": 0, "confidence": 1.0, "metadata": "{}",
    }  # fmt: skip


async def test_the_rows_a_query_matches_at_all(db):
    def write(uow):
        project = uow.projects.insert({"name": "p"}, "t")
        session = uow.sessions.insert("ext-1", "s", project.id, {}, "t")
        episodes = [
            uow.episodes.insert(session.id, user, answer, {}, None)
            for user, answer in (
                ("Our Postgres runs on port 5433", "Noted."),
                ("Which ports are open?", "Port 22 only."),
                ("I prefer short answers", "Understood."),
                ("Lunch is at noon", "Noted."),
            )
        ]
        memories = [
            uow.memories.insert(memory(text, project.id), None, "t")
            for text in ("Postgres runs on port 5433", "Short answers please")
        ]
        return [e.id for e in episodes], [m.id for m in memories]

    episodes, memories = await db.write(write)
    match = match_expression("which port is the database on")

    def read(uow):
        return (
            uow.episodes.keyword_matching(match, episodes),
            uow.memories.keyword_matching(match, memories),
            uow.episodes.keyword_matching(match, []),
        )

    matched_episodes, matched_memories, none = await db.read(read)
    # "ports" is a form of "port"; the third holds no query word, but the turn
    # before it does (the keyword index reads each episode with its
    # neighbours); the fourth matches nothing.
    assert matched_episodes == set(episodes[:3])
    assert matched_memories == {memories[0]}
    assert none == set()
