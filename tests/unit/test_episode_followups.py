"""What follows a new episode (domain/episode_followups.py), decided by the
domain on the fakes of tests/fakes.py: the jobs it queues, at which
priority, its memory formation and the session's summary."""

from __future__ import annotations

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.models import JobState, MemoryFormation
from nexus_grpc.domain.episode_followups import (
    SUMMARY_MIN_CHARS,
    SUMMARY_MIN_NEW_EPISODES,
    queue_followups,
    summary_due,
)
from tests.fakes import FakeUnitOfWork


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


def session_in(uow, formation: MemoryFormation | None = None, user: str = "ann") -> int:
    values = {"name": "p"} if formation is None else {"name": "p", "memory_formation": formation}
    project = uow.projects.insert(values)
    return uow.sessions.insert(f"s{project.id}", "", project.id, {}, user_id=user).id


def store(uow, session_id: int, text: str = "hello", **kw):
    episode = uow.episodes.insert(session_id, text, "ok", {}, None, acts_for="ann")
    queue_followups(uow, [episode], kw.pop("priority", jobs.LIVE), **kw)
    return uow.episodes.get(episode.id)


def test_a_live_episode_is_indexed_extracted_and_formed_at_live_priority(uow):
    episode = store(uow, session_in(uow))
    for kind in (jobs.INDEX_EPISODE, jobs.EXTRACT_EPISODE):
        job = uow.jobs.pending_job(kind, episode.id)
        assert job is not None and job.priority == jobs.LIVE
    assert episode.memory_state == JobState.PENDING


def test_an_import_queues_the_same_behind_live_traffic(uow):
    episode = store(uow, session_in(uow), priority=jobs.BULK)
    assert uow.jobs.pending_job(jobs.EXTRACT_EPISODE, episode.id).priority == jobs.BULK


def test_an_episode_stored_with_its_vector_is_not_indexed_again(uow):
    episode = store(uow, session_in(uow), embedded=True)
    assert uow.jobs.pending_job(jobs.INDEX_EPISODE, episode.id) is None
    assert uow.jobs.pending_job(jobs.EXTRACT_EPISODE, episode.id) is not None


def test_a_restored_episode_is_only_indexed(uow):
    """Its graph arrives with it: a second extraction would count every
    mention twice, and its memories and summaries arrive too."""
    episode = store(uow, session_in(uow), extracted=True)
    assert uow.jobs.pending_job(jobs.INDEX_EPISODE, episode.id) is not None
    assert uow.jobs.pending_job(jobs.EXTRACT_EPISODE, episode.id) is None
    assert episode.memory_state is None


@pytest.mark.parametrize(
    ("formation", "user", "forms"),
    [
        (None, "ann", True),  # the default: USER memories of the session's user
        (None, "", False),  # ...of nobody
        (MemoryFormation.OFF, "ann", False),
        (MemoryFormation.USER_AND_PROJECT, "", True),  # the project's still form
    ],
)
def test_formation_is_due_where_the_project_and_the_session_say(uow, formation, user, forms):
    episode = store(uow, session_in(uow, formation, user))
    assert (episode.memory_state == JobState.PENDING) is forms


def test_a_summary_is_due_once_enough_was_said_and_queued_once(uow):
    session = session_in(uow)
    long = "x" * (SUMMARY_MIN_CHARS // SUMMARY_MIN_NEW_EPISODES + 1)
    for _ in range(SUMMARY_MIN_NEW_EPISODES - 1):
        store(uow, session, long)
    assert uow.jobs.pending_job(jobs.SUMMARIZE_SESSION, session) is None
    store(uow, session, long)
    assert uow.jobs.pending_job(jobs.SUMMARIZE_SESSION, session) is not None
    # Queued: the job reads whatever comes next too, so none is due again.
    assert not summary_due(uow, session)


def test_a_short_conversation_is_not_summarized_however_many_turns(uow):
    session = session_in(uow)
    for _ in range(SUMMARY_MIN_NEW_EPISODES * 2):
        store(uow, session, "hi")
    assert uow.jobs.pending_job(jobs.SUMMARIZE_SESSION, session) is None
