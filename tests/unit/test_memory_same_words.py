"""A memory told twice is stored once (domain/memories.py ``create``), decided
by the domain on the fakes of tests/fakes.py.

A create whose title and content are an owner's live memory's in the same
tier, case and punctuation aside, answers with that memory and stores
nothing; anything else that differs (the words, the tier, the owner, the
origin session of a TASK or SESSION memory) is another memory. What a client
sees of it (the x-nexus-existing trailer) is
tests/e2e/service/test_memories.py's
``test_the_same_words_in_the_same_tier_and_owner_are_not_stored_twice``.
"""

from __future__ import annotations

from typing import Any

from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.memories import Memories
from tests.fakes import FakeDatabase, FakeUnitOfWork

P, U = int(MemoryKind.PROJECT), int(MemoryKind.USER)
TASK, LONGTERM, ARCHIVE = int(Tier.TASK), int(Tier.LONGTERM), int(Tier.ARCHIVE)


def world() -> tuple[FakeUnitOfWork, Memories, int, int, int, int]:
    uow = FakeUnitOfWork()
    p1, p2 = (uow.projects.insert({"name": n}).id for n in ("p1", "p2"))
    s1, s2 = (uow.sessions.insert(f"s{i}", "", p1, {}).id for i in (1, 2))
    # Neither the embedder nor the vector index is read by these rules.
    m = Memories(FakeDatabase(uow), JobSignals(), None, None)  # type: ignore[arg-type]
    return uow, m, p1, p2, s1, s2


async def test_the_same_words_case_and_punctuation_aside_answer_with_the_stored_memory():
    uow, m, p1, *_ = world()
    heard: list[str] = []
    fact = {"kind": P, "project_id": p1, "title": "Postgres port", "tier": LONGTERM}
    first = await m.create(
        {**fact, "content": "Postgres runs on port 5433."}, on_existing=heard.append
    )
    assert heard == []
    again = await m.create(
        {**fact, "title": "postgres PORT", "content": "postgres runs on port 5433"},
        "another-call",  # a new call, not a replay of the first
        on_existing=heard.append,
    )
    assert (again.id, again.content) == (first.id, "Postgres runs on port 5433.")
    assert heard == [
        f"memory {first.id} already holds these words in this tier; it is returned and nothing"
        " was stored"
    ]
    assert len(uow.memories.rows) == 1


async def test_words_beyond_ascii_are_compared_by_python_not_the_database():
    """SQLite's lower() folds only ASCII: the words compared are Python's."""
    uow, m, *_ = world()

    def lives(content: str) -> dict[str, Any]:
        return {"kind": U, "user_id": "bob", "title": "Wohnort", "tier": LONGTERM,
                "content": content}  # fmt: skip

    home = await m.create(lives("Ich wohne in MÜNCHEN."))
    assert (await m.create(lives("ich wohne in münchen"))).id == home.id
    assert (await m.create(lives("Ich wohne in Köln."))).id != home.id


async def test_anything_else_that_differs_is_another_memory_itself_stored_once():
    uow, m, p1, p2, s1, s2 = world()
    fact = {"kind": P, "project_id": p1, "title": "Postgres port", "tier": LONGTERM,
            "content": "Postgres runs on port 5433"}  # fmt: skip
    first = await m.create(fact)
    others = [
        {**fact, "content": "Postgres runs on port 5434"},
        {**fact, "tier": ARCHIVE},
        {**fact, "project_id": p2},
        {**fact, "agent_id": "other-agent"},
        {**fact, "kind": U, "user_id": "bob"},
        {**fact, "tier": TASK, "session_id": s1},
        {**fact, "tier": TASK, "session_id": s2},
    ]
    ids = {first.id}
    for values in others:
        made = await m.create(values)
        assert made.id not in ids, values
        ids.add(made.id)
    for values in others:
        assert (await m.create(values)).id in ids
    assert len(uow.memories.rows) == len(others) + 1
    # A deleted memory holds nothing: the same words are stored again.
    await m.delete(first.id, "")
    assert (await m.create(fact)).id not in ids
