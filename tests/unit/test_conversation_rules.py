"""What the conversation record's use cases decide (domain/conversations.py),
on the fakes of tests/fakes.py: projects, sessions and episodes refused by
name with nothing written, what an update may change, listing a page at a
time, a request_id's replay, and an episode attaching its session to a
project.

What a client sees of them over gRPC (the status codes, the trailers, the
conversions of the wire's types) is tests/e2e/service/test_conversations.py's.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.conversations import PROJECT_FIELDS, Conversations
from nexus_grpc.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def c(uow: FakeUnitOfWork) -> Conversations:
    return Conversations(FakeDatabase(uow), JobSignals())


async def refused(error: type[Exception], call) -> str:
    with pytest.raises(error) as err:
        await call
    return str(err.value)


async def project(c: Conversations, name: str, **values: Any) -> int:
    return (await c.create_project({"name": name, **values})).id


async def session(c: Conversations, project_id: int = 0, **kw: Any) -> int:
    return (await c.create_session("", kw.pop("name", ""), project_id, {}, **kw)).id


# Projects


async def test_a_project_needs_a_name_that_shows(uow, c):
    assert "project.name" in await refused(InvalidArgument, c.create_project({}))
    # Only spaces, or only zero-width and byte-order marks: nothing to show.
    for name in ("  \t ", "\u200b\ufeff", " \u200b "):
        assert "blank" in await refused(InvalidArgument, c.create_project({"name": name}))
    assert uow.projects.rows == {}
    # A visible character makes it a name.
    assert (await c.create_project({"name": "\u200bnamed"})).name == "\u200bnamed"


async def test_a_project_update_changes_only_what_its_mask_names(uow, c):
    pid = await project(c, "Atlas", description="d", notes="n")
    updated = await c.update_project(pid, {"notes": "new", "name": "ignored"}, ["notes"])
    assert (updated.notes, updated.name, updated.description) == ("new", "Atlas", "d")
    assert "update_mask" in await refused(InvalidArgument, c.update_project(pid, {}, []))
    message = await refused(InvalidArgument, c.update_project(pid, {"id": 5}, ["id"]))
    assert "cannot be updated" in message and all(f in message for f in PROJECT_FIELDS)
    assert "project.name" in await refused(
        InvalidArgument, c.update_project(pid, {"name": ""}, ["name"])
    )
    assert uow.projects.rows[pid].name == "Atlas"


async def test_an_unknown_project_is_not_found_and_a_bad_id_is_named(c):
    assert "project 99 does not exist" in await refused(NotFound, c.get_project(99))
    assert "id" in await refused(InvalidArgument, c.get_project(-1))
    await refused(NotFound, c.update_project(77, {"notes": "x"}, ["notes"]))
    await refused(NotFound, c.delete_project(77))


async def test_projects_are_listed_a_page_at_a_time_to_an_empty_token(c):
    for i in range(5):
        await project(c, f"p{i}")
    seen, token = [], ""
    while True:
        page = await c.list_projects(2, token)
        seen += [p.name for p in page.items]
        token = page.next_token
        if not token:
            break
    assert seen == [f"p{i}" for i in range(5)]
    assert "page_size" in await refused(InvalidArgument, c.list_projects(-1, ""))
    assert "page_token" in await refused(InvalidArgument, c.list_projects(0, "junk!"))
    huge = base64.urlsafe_b64encode(b"after:99999999999999999999999").decode().rstrip("=")
    assert "page_token" in await refused(InvalidArgument, c.list_projects(0, huge))


async def test_a_huge_rejected_value_is_quoted_only_in_part(c):
    """Found by tests/e2e/api/test_fuzz_rpcs.py: a 100 kB page_token (or mask
    path) was quoted whole in the status message, which grpc caps at 16 KiB,
    so the client got RESOURCE_EXHAUSTED instead of the mistake."""
    pid = await project(c, "p")
    for call, field in (
        (c.list_projects(0, "x" * 100_000), "page_token"),
        (c.update_project(pid, {"name": "n"}, ["é" * 100_000]), "update_mask"),
        (c.create_session("u" * 100_000, "", 0, {}), "external_id"),
    ):
        message = await refused(InvalidArgument, call)
        assert field in message and "100000 characters" in message and len(message) < 500


# Sessions


async def test_a_session_is_refused_by_name_and_nothing_is_written(uow, c):
    assert "external_id" in await refused(InvalidArgument, c.get_session())
    assert "UUID" in await refused(InvalidArgument, c.get_session(external_id="nope"))
    assert "session 5 does not exist" in await refused(NotFound, c.get_session(5))
    assert "project_id 42" in await refused(FailedPrecondition, session(c, 42))
    assert "session.name" in await refused(InvalidArgument, session(c, name="x" * 1000))
    assert uow.sessions.rows == {}
    sid = await session(c)
    message = await refused(
        FailedPrecondition, c.update_session(sid, {"project_id": 9}, ["project_id"])
    )
    assert "session.project_id 9 does not exist" in message
    assert uow.sessions.rows[sid].project_id == 0
    await refused(NotFound, c.delete_session(404))


async def test_an_external_id_names_one_session(uow, c):
    first = await c.create_session("", "chat", 0, {"client": "cli"})
    assert len(first.external_id) == 36  # one is made when none is given
    found = await c.get_session(external_id=first.external_id.upper())
    assert found.id == first.id  # one spelling per UUID
    message = await refused(AlreadyExists, c.create_session(first.external_id, "", 0, {}))
    assert first.external_id in message
    assert list(uow.sessions.rows) == [first.id]


async def test_a_session_update_changes_only_what_its_mask_names(c):
    pid = await project(c, "p")
    sid = await session(c, name="before")
    updated = await c.update_session(sid, {"project_id": pid, "name": "ignored"}, ["project_id"])
    assert (updated.project_id, updated.name) == (pid, "before")


async def test_sessions_are_listed_by_project(c):
    pid = await project(c, "p")
    inside = [await session(c, pid) for _ in range(3)]
    outside = await session(c)
    page = await c.list_sessions(0, "", pid)
    assert [s.id for s in page.items] == inside and page.next_token == ""
    everyone = await c.list_sessions(0, "", 0)
    assert [s.id for s in everyone.items] == [*inside, outside]


# Episodes


async def episode(c: Conversations, sid: int, user: str = "a", **kw: Any):
    return await c.create_episode(
        sid,
        user,
        kw.pop("ai", "b"),
        kw.pop("metadata", {}),
        kw.pop("request_id", ""),
        kw.pop("project_id", 0),
        kw.pop("occur_at", None),
    )


async def test_a_bad_episode_is_refused_by_name_and_writes_nothing(uow, c):
    sid = await session(c)
    assert "user_message" in await refused(InvalidArgument, episode(c, sid, "  "))
    assert "session_id" in await refused(InvalidArgument, episode(c, 0, "x"))
    assert "session 999" in await refused(NotFound, episode(c, 999, "x"))
    assert "limit" in await refused(InvalidArgument, episode(c, sid, "x" * 100_001))
    assert "project_id 5 does not exist" in await refused(
        FailedPrecondition, episode(c, sid, "x", project_id=5)
    )
    assert "occur_time" in await refused(
        InvalidArgument, episode(c, sid, "x", occur_at=time.time() + 86_400)
    )
    assert uow.episodes.rows == {} and uow.jobs.rows == []


async def test_a_request_id_replays_only_the_same_episode(uow, c):
    """Found by tests/e2e/api/test_fuzz_rpcs.py: a retry key reused with other
    content (or a project that does not exist) answered with the first episode."""
    pid = await project(c, "p")
    sid = await session(c)
    first = await episode(c, sid, request_id="r-1")
    assert (await episode(c, sid, request_id="r-1")).id == first.id
    for field, changed in (
        ("user_message", {"user": "other"}),
        ("ai_response", {"ai": ""}),
        ("project_id", {"project_id": pid}),
        ("project_id", {"project_id": 999}),
        ("metadata", {"metadata": {"k": 1}}),
        ("occur_time", {"occur_at": 1_683_554_160.0}),
    ):
        message = await refused(AlreadyExists, episode(c, sid, request_id="r-1", **changed))
        assert "'r-1'" in message and f"different {field}" in message, message
    # Surrounding spaces would make a second key that looks like the first.
    assert "request_id" in await refused(InvalidArgument, episode(c, sid, request_id=" r-1"))
    assert list(uow.episodes.rows) == [first.id]
    assert uow.sessions.rows[sid].project_id == 0  # the refused retries attached nothing


async def test_a_time_given_once_is_the_time_a_retry_must_name(uow, c):
    """An unset occur_time means "now", which a retry cannot repeat: only a
    given one is compared."""
    sid = await session(c)
    first = await episode(c, sid, request_id="r1", occur_at=1_683_554_160.0)
    assert (await episode(c, sid, request_id="r1", occur_at=1_683_554_160.0)).id == first.id
    assert (await episode(c, sid, request_id="r1")).id == first.id
    message = await refused(AlreadyExists, episode(c, sid, request_id="r1", occur_at=1.0))
    assert "different occur_time" in message
    assert list(uow.episodes.rows) == [first.id]


async def test_an_episode_attaches_a_session_without_a_project_to_its_project(uow, c):
    pid, other = await project(c, "p"), await project(c, "q")
    sid = await session(c)
    await episode(c, sid, project_id=pid)
    assert uow.sessions.rows[sid].project_id == pid
    await episode(c, sid, project_id=pid)  # the same project: nothing to do
    message = await refused(FailedPrecondition, episode(c, sid, project_id=other))
    assert f"session {sid} belongs to project {pid}, not project_id {other}" in message
    assert len(uow.episodes.rows) == 2
    assert uow.jobs.pending(jobs.INDEX_EPISODE) == sorted(uow.episodes.rows)


# A project's retention


@pytest.mark.parametrize(
    ("retention", "words"),
    [
        (0.0, "must be positive"),
        (-5.0, "must be positive"),
        (101 * 366 * 86_400.0, "at most 100 years"),
        (5.0000005, "whole seconds"),
    ],
)
async def test_a_bad_retention_is_refused_by_name_and_writes_nothing(uow, c, retention, words):
    message = await refused(
        InvalidArgument, c.create_project({"name": "p", "retention": retention})
    )
    assert "project.retention" in message and words in message
    assert uow.projects.rows == {} and uow.jobs.rows == []
    pid = await project(c, "p", retention=86_400.0)
    sweeps = [(j.target_id, j.run_after) for j in uow.jobs.rows]
    assert sweeps == [(pid, uow.projects.rows[pid].created_at)]  # due from its creation
    message = await refused(
        InvalidArgument, c.update_project(pid, {"retention": retention}, ["retention"])
    )
    assert "project.retention" in message and words in message
    assert uow.projects.rows[pid].retention == 86_400.0
    assert [(j.target_id, j.run_after) for j in uow.jobs.rows] == sweeps
