"""An extraction that fails, and ExtractEpisode putting it back
(domain/extraction.py's ``note_retry``, ``mark_failed`` and
``Extraction.requeue``), decided on the fakes of tests/fakes.py: what the
episode, its event and its memory formation say of a retry and of a dead
letter, which requests ExtractEpisode refuses in the domain, and what one
episode or every failed one is put back as.

The worker that retries, waits and dead-letters, and the RPC's own request
checks, are the whole server's: tests/e2e/service/test_extraction.py."""

from __future__ import annotations

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.models import JobState
from nexus_grpc.core.records import EXTRACTION_FAILED
from nexus_grpc.domain.episode_followups import queue_followups
from nexus_grpc.domain.extraction import mark_failed, note_retry
from nexus_grpc.errors import InvalidArgument, NotFound
from tests.unit.extraction_world import World


def stored(w: World, session_id: int, text: str = "hello") -> int:
    """An episode as CreateEpisode stores it, its extraction (and formation,
    where due) queued."""
    user = w.uow.sessions.rows[session_id].user_id
    episode = w.uow.episodes.insert(session_id, text, "ok", {}, None, acts_for=user)
    queue_followups(w.uow, [episode], jobs.LIVE)
    return episode.id


def dead_letter(w: World, episode_id: int, error: str) -> None:
    """What the extract worker does when it gives up on an episode."""
    job = w.uow.jobs.pending_job(jobs.EXTRACT_EPISODE, episode_id)
    assert job is not None
    w.uow.jobs.dead_letter(job.id, error)
    mark_failed(w.uow, job, error)  # type: ignore[arg-type]


def test_a_retry_leaves_the_episode_pending_with_its_last_error():
    w = World()
    ep = stored(w, w.session())
    job = w.uow.jobs.pending_job(jobs.EXTRACT_EPISODE, ep)
    note_retry(w.uow, job, "Ollama (q) at x failed (HTTP 500): runner crashed")  # type: ignore[arg-type]
    episode = w.uow.episodes.get(ep)
    assert episode.extract_state == JobState.PENDING
    assert "runner crashed" in episode.extract_error


def test_a_dead_letter_fails_the_episode_its_event_and_its_formation_saying_why():
    w = World()
    ep = stored(w, w.session(w.project(), user_id="alice"))
    assert w.uow.episodes.get(ep).memory_state == JobState.PENDING
    dead_letter(w, ep, "Ollama did not answer JSON")
    episode = w.uow.episodes.get(ep)
    assert episode.extract_state == JobState.FAILED
    assert episode.extract_error == "Ollama did not answer JSON"
    # Watchers hear both: the extraction's failure, then its formation's.
    extraction, formation = [
        e for e, _ in sorted(w.uow.events.rows.values(), key=lambda row: row[0].id)
    ]
    assert {extraction.status, formation.status} == {EXTRACTION_FAILED}
    assert {extraction.episode_id, formation.episode_id} == {ep}
    assert extraction.error == "Ollama did not answer JSON"
    assert "formation" not in extraction.payload and "formation" in formation.payload
    assert formation.error == "extraction failed: Ollama did not answer JSON"
    assert episode.memory_state == JobState.FAILED
    assert episode.memory_error == "extraction failed: Ollama did not answer JSON"


async def test_extract_episode_refuses_a_bad_id_a_missing_episode_and_both_targets():
    w = World()
    ex = w.extraction()
    with pytest.raises(InvalidArgument, match="episode_id") as bad:
        await ex.requeue(-4, False)
    assert bad.value.field == "episode_id"
    with pytest.raises(NotFound, match="999"):
        await ex.requeue(999, False)
    with pytest.raises(InvalidArgument, match="not both"):
        await ex.requeue(5, True)
    assert w.uow.jobs.rows == []  # nothing was queued


async def test_all_failed_puts_every_failed_episode_back_and_none_is_none():
    w = World()
    ex = w.extraction()
    assert await ex.requeue(0, True) == 0
    s = w.session()
    failed = [stored(w, s, f"message {i}") for i in range(2)]
    fine = stored(w, s, "fine")
    for ep in failed:
        dead_letter(w, ep, "the job's lease ran out")
    assert await ex.requeue(0, True) == 2
    for ep in failed:
        episode = w.uow.episodes.get(ep)
        assert (episode.extract_state, episode.extract_error) == (JobState.PENDING, "")
        job = w.uow.jobs.pending_job(jobs.EXTRACT_EPISODE, ep)
        assert job is not None and job.attempts == 0
    # The episode that never failed keeps its one pending job.
    assert [j.target_id for j in w.uow.jobs.rows if j.kind == jobs.EXTRACT_EPISODE].count(fine) == 1
    assert await ex.requeue(0, True) == 0


async def test_one_episode_put_back_is_extracted_and_formed_again():
    w = World()
    ep = stored(w, w.session(w.project(), user_id="alice"))
    dead_letter(w, ep, "Ollama did not answer JSON")
    assert await w.extraction().requeue(ep, False) == 1
    episode = w.uow.episodes.get(ep)
    assert episode.extract_state == JobState.PENDING
    assert w.uow.jobs.pending_job(jobs.EXTRACT_EPISODE, ep) is not None
    # Its memories form again from the new answer.
    assert episode.memory_state == JobState.PENDING
