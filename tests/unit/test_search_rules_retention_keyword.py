"""A project's retention on SearchEpisodes' keyword path and a memory's expiry
on SearchMemories', on the fakes of tests/fakes.py (whose keyword index
matches as both stores do: tests/integration/store/test_repository_contract_keyword.py).

An exchange past the project's retention is hidden from a keyword search of
a session, of the project and of a window reaching back past it, from the
moment the retention is set and before any sweep deletes it; cleared, it is
found again. A memory whose expiry has passed is hidden from keyword search
before its job removes it.

The same on the semantic and hybrid paths, and every other read, are
tests/e2e/service/test_project_retention.py's and test_memory_expiry.py's.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from nexus_grpc.core.models import MemoryKind, MemoryScope, SearchMode, TimeWindow
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.retrieval.search import EpisodeSearch, MemorySearch
from tests.fakes import FakeDatabase, FakeUnitOfWork

DAY = 86_400.0
KEYWORD = SearchMode.KEYWORD


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def conv(uow: FakeUnitOfWork) -> Conversations:
    return Conversations(FakeDatabase(uow), JobSignals())


async def world(uow: FakeUnitOfWork, conv: Conversations):
    """A project with a session of an old and a recent exchange, and a session
    created long ago whose every exchange is old (as the e2e test's world)."""
    now = time.time()
    project = (await conv.create_project({"name": "p"})).id
    mixed = (await conv.create_session("", "", project, {})).id
    stale = (await conv.create_session("", "", project, {})).id
    eps = {}
    for name, session, when in (
        ("old", mixed, now - 3 * DAY),
        ("new", mixed, now - 60),
        ("stale", stale, now - 5 * DAY),
    ):
        text = f"zebra {name} exchange"
        eps[name] = (await conv.create_episode(session, text, "noted", {}, "", 0, when)).id
    uow.sessions.rows[stale] = replace(uow.sessions.rows[stale], created_at=now - 5 * DAY)
    return project, mixed, eps


async def keyword_reads(uow: FakeUnitOfWork, project: int, mixed: int, eps) -> dict[str, set]:
    names = {i: n for n, i in eps.items()}
    search = EpisodeSearch(FakeDatabase(uow), None, None)  # type: ignore[arg-type]
    got = {}
    for label, session_id, project_id, window in (
        ("session", mixed, 0, None),
        ("project", 0, project, None),
        # A window reaching back past the retention does not reach past it.
        ("window", 0, project, TimeWindow(0.0, None)),
    ):
        hits = search.search("zebra exchange", session_id, project_id, 10, KEYWORD, window=window)
        got[label] = {names[h.episode.id] async for h in hits}
    return got


async def test_past_retention_is_hidden_from_keyword_search_before_any_sweep(uow, conv):
    project, mixed, eps = await world(uow, conv)
    reads = ("session", "project", "window")
    # The positive case first: without a retention every search finds all three.
    assert await keyword_reads(uow, project, mixed, eps) == {r: set(eps) for r in reads}
    await conv.update_project(project, {"retention": 2 * DAY}, ["retention"])
    assert await keyword_reads(uow, project, mixed, eps) == {r: {"new"} for r in reads}
    # Nothing was deleted: the reads alone hide it.
    assert sorted(uow.episodes.rows) == sorted(eps.values())
    await conv.update_project(project, {"retention": None}, ["retention"])
    assert await keyword_reads(uow, project, mixed, eps) == {r: set(eps) for r in reads}


async def test_an_expired_memory_is_hidden_from_keyword_search_before_its_job(uow, conv):
    project = (await conv.create_project({"name": "p"})).id
    memories = Memories(FakeDatabase(uow), JobSignals(), None, None)  # type: ignore[arg-type]
    kept = await memories.create(
        {"kind": int(MemoryKind.PROJECT), "project_id": project, "title": "zebra kept",
         "content": "zebra"}
    )  # fmt: skip
    later = await memories.create(
        {"kind": int(MemoryKind.USER), "user_id": "alice", "project_id": project,
         "title": "zebra soon", "content": "zebra", "expire_at": time.time() + 3600}
    )  # fmt: skip
    search = MemorySearch(FakeDatabase(uow), None, None)  # type: ignore[arg-type]
    scope = MemoryScope(project_id=project, user_id="alice")

    async def found() -> set[int]:
        return {h.memory.id async for h in search.search("zebra", scope, 50, KEYWORD)}

    assert await found() == {kept.id, later.id}
    # Time passes for this memory only: its expiry is behind us, its job an hour away.
    uow.memories.rows[later.id] = replace(later, expire_at=time.time() - 1)
    assert await found() == {kept.id}
    assert later.id in uow.memories.rows
