"""What SummaryService's use cases decide (domain/summaries.py), on the fakes
of tests/fakes.py: which summaries a call may write and to what, what
listing and overviews answer, what is refused without a model, and which
index jobs each write queues, and how a pass dates the exchanges it reads.

What a client sees of them over gRPC (the status codes, the overview's
stream, the model's prompts) is tests/e2e/service/test_summaries.py's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.models import Episode
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.summaries import Summaries, _dated_body
from nexus_grpc.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.seeding import project_session


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def summaries(uow: FakeUnitOfWork) -> Summaries:
    # No model: what is decided before a model is asked is what is tested here.
    return Summaries(FakeDatabase(uow), JobSignals(), None, "qwen2.5:3b")


@pytest.fixture
def in_tenant() -> Iterator[None]:
    """The calls made as a key of tenant 'team' (it sees that tenant only)."""
    token = tenancy.bind(tenancy.Caller("team"))
    yield
    tenancy.reset(token)


def index_jobs(uow: FakeUnitOfWork) -> list[tuple[int, str]]:
    """The pending summary index jobs (target, tenant), taken off the queue."""
    found = [(j.target_id, j.tenant) for j in uow.jobs.rows if j.kind == jobs.INDEX_SUMMARY]
    uow.jobs.rows = [j for j in uow.jobs.rows if j.kind != jobs.INDEX_SUMMARY]
    return found


async def refused(error: type[Exception], call) -> str:
    with pytest.raises(error) as err:
        await call
    return str(err.value)


async def test_a_summary_belongs_to_a_session_or_a_project_that_exists(uow, summaries):
    pid, sid = project_session(uow)
    _, other_sid = project_session(uow, "other")
    create = summaries.create
    assert "needs a session_id or a project_id" in await refused(
        InvalidArgument, create(0, 0, "x", {})
    )
    assert "summary.content" in await refused(InvalidArgument, create(sid, 0, " ", {}))
    assert "summary.session_id 999 does not exist" in await refused(
        FailedPrecondition, create(999, 0, "x", {})
    )
    assert "summary.project_id 999 does not exist" in await refused(
        FailedPrecondition, create(0, 999, "x", {})
    )
    message = await refused(InvalidArgument, create(other_sid, pid, "x", {}))
    assert f"session {other_sid} is not in project {pid}" in message
    # A range runs forwards: refused before anything is read.
    message = await refused(
        InvalidArgument, create(sid, 0, "c", {"first_episode_id": 9, "last_episode_id": 3})
    )
    assert "summary.first_episode_id 9 is after summary.last_episode_id 3" in message
    assert uow.summaries.rows == {} and index_jobs(uow) == []
    # A session's summary reads its session's project; an overview is the project's alone.
    mine = await create(sid, pid, "first", {"episode_count": 3})
    assert (mine.session_id, mine.project_id, mine.episode_count) == (sid, pid, 3)
    overview = await create(0, pid, "overview", {})
    assert (overview.session_id, overview.project_id) == (0, pid)


async def test_another_tenants_session_or_project_reads_as_missing(uow, summaries, in_tenant):
    pid, sid = project_session(uow, "theirs")  # the default tenant's
    assert "summary.session_id" in await refused(
        FailedPrecondition, summaries.create(sid, 0, "x", {})
    )
    assert "summary.project_id" in await refused(
        FailedPrecondition, summaries.create(0, pid, "x", {})
    )
    theirs = uow.summaries.insert(session_id=sid, project_id=0, content="theirs")
    for call in (
        summaries.get(theirs.id),
        summaries.update(theirs.id, "mine now", ["content"]),
        summaries.delete(theirs.id),
        summaries.list(sid, 0, 0, ""),
        summaries.list(0, pid, 0, ""),
        summaries.get_overview(pid),
    ):
        await refused(NotFound, call)
    assert uow.summaries.rows[theirs.id].content == "theirs"


async def test_summaries_are_listed_by_session_or_by_project_a_page_at_a_time(uow, summaries):
    pid, sid = project_session(uow)
    a = await summaries.create(sid, 0, "first", {})
    b = await summaries.create(0, pid, "overview", {})
    assert [s.id for s in (await summaries.list(sid, 0, 0, "")).items] == [a.id]
    page = await summaries.list(0, pid, 1, "")
    assert [s.id for s in page.items] == [a.id] and page.next_token
    rest = await summaries.list(0, pid, 1, page.next_token)
    assert [s.id for s in rest.items] == [b.id] and rest.next_token == ""
    message = await refused(InvalidArgument, summaries.list(0, 0, 0, ""))
    assert "session_id or project_id is required" in message
    await refused(NotFound, summaries.list(999, 0, 0, ""))
    assert "project 999 does not exist" in await refused(NotFound, summaries.list(0, 999, 0, ""))


async def test_an_update_names_its_field_and_changes_only_the_content(uow, summaries):
    _, sid = project_session(uow)
    a = await summaries.create(sid, 0, "first", {"episode_count": 2})
    assert "update_mask" in await refused(InvalidArgument, summaries.update(a.id, "x", []))
    await refused(InvalidArgument, summaries.update(a.id, "x", ["episode_count"]))
    updated = await summaries.update(a.id, "changed", ["content"])
    assert (updated.content, updated.episode_count) == ("changed", 2)
    await summaries.delete(a.id)
    assert f"summary {a.id} does not exist" in await refused(NotFound, summaries.get(a.id))


async def test_a_project_without_an_overview_has_none_and_an_unknown_one_is_not_found(
    uow, summaries
):
    pid, _ = project_session(uow)
    assert await summaries.get_overview(pid) is None
    assert "project 999 does not exist" in await refused(NotFound, summaries.get_overview(999))
    overview = await summaries.create(0, pid, "overview", {})
    assert (await summaries.get_overview(pid)).id == overview.id


async def drain(stream) -> list:
    return [part async for part in stream]


async def test_without_a_model_summarizing_is_unavailable_once_there_is_something_to_say(
    uow, summaries
):
    pid, sid = project_session(uow)
    # Nothing to write an overview from: that is said first, model or not.
    message = await refused(FailedPrecondition, drain(summaries.summarize_project(pid)))
    assert f"project {pid} has no session summaries and no episodes" in message
    await refused(NotFound, drain(summaries.summarize_project(999)))
    await refused(NotFound, summaries.summarize_session(999))
    uow.episodes.insert(sid, "hi", "hello", {}, None)
    assert "summaries need Ollama" in await refused(Unavailable, summaries.summarize_session(sid))
    assert "project overviews need Ollama" in await refused(
        Unavailable, drain(summaries.summarize_project(pid))
    )
    assert uow.summaries.rows == {} and uow.usage.rows == []


async def test_each_summary_write_queues_its_index_job_in_its_tenant(uow, summaries, in_tenant):
    """Create, update and delete each queue the summary's index job with the
    write; the delete's is queued while the row is there, so it carries the
    summary's tenant (a job queued after would carry none)."""
    _, sid = project_session(uow, "ours", "team")
    a = await summaries.create(sid, 0, "x", {})
    assert index_jobs(uow) == [(a.id, "team")]
    await summaries.update(a.id, "y", ["content"])
    assert index_jobs(uow) == [(a.id, "team")]
    await summaries.delete(a.id)
    assert index_jobs(uow) == [(a.id, "team")]


async def test_a_session_moved_to_another_project_queues_its_summaries_index_jobs(uow, summaries):
    """Its summaries carry the project in their vector payload
    (domain/conversations.py's _session_moved); a rename moves nothing."""
    _, sid = project_session(uow)
    other, _ = project_session(uow, "elsewhere")
    a = await summaries.create(sid, 0, "x", {})
    b = await summaries.create(sid, 0, "y", {})
    index_jobs(uow)
    conversations = Conversations(FakeDatabase(uow), JobSignals())
    await conversations.update_session(sid, {"project_id": other}, ["project_id"])
    assert sorted(index_jobs(uow)) == [(a.id, "default"), (b.id, "default")]
    await conversations.update_session(sid, {"name": "renamed"}, ["name"])
    assert index_jobs(uow) == []


def test_a_summary_pass_dates_an_imported_exchange_and_not_a_live_one():
    """An exchange stored well after it happened (an import, occur_time given)
    is led by its date; a live one happened when it was stored."""
    base = 1_683_554_160.0  # 8 May 2023, 13:56 UTC
    imported = Episode(1, 1, "we moved to Paris", "noted", created_at=base + 86_400, occur_at=base)
    live = Episode(2, 1, "live now", "ok", created_at=base + 86_400, occur_at=base + 86_430)
    text = _dated_body([imported, live])
    assert "(On 08 May 2023, 13:56 UTC)\nUser: we moved to Paris" in text
    assert "UTC)\nUser: live now" not in text and "User: live now" in text


async def test_an_episode_count_is_a_count_a_store_keeps(uow, summaries):
    """PostgreSQL keeps episode_count in an INTEGER: a larger one was INTERNAL
    there (the fuzz soak found it); it is refused by name before anything is
    written, on both stores alike."""
    _, session = project_session(uow)
    for bad in (2**31, -1):
        message = await refused(
            InvalidArgument,
            summaries.create(session, 0, "s", {"episode_count": bad}),
        )
        assert message == f"summary.episode_count must be a count from 0 to 2147483647, got {bad}"
    assert not uow.summaries.rows
    made = await summaries.create(session, 0, "s", {"episode_count": 2**31 - 1})
    assert made.episode_count == 2**31 - 1
