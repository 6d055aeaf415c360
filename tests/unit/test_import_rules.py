"""ImportEpisodes' rules (domain/episode_import.py and
Conversations.import_episodes), on the fakes of tests/fakes.py: every item
written in stream order across batches with its time, a resent import (or a
request_id twice in one stream) replayed with nothing new written, a bad item
that item's error while the others go on, and a call past the limit keeping
what came before it.

What a client sees of it over gRPC (the answer's counts and per-item codes,
an item the wire could not decode or convert, the call's refusal past the
limit, the generated client, the store's claim order and keyword context) is
tests/e2e/service/test_import_episodes.py's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import episode_import
from nexus_grpc.domain.conversations import Conversations, EpisodeInput, Imported
from nexus_grpc.domain.episode_import import EpisodeImport
from nexus_grpc.errors import (
    AlreadyExists,
    InvalidArgument,
    NexusError,
    NotFound,
)
from tests.fakes import FakeDatabase, FakeUnitOfWork

# 8 May 2023, 13:56 UTC.
BASE = 1_683_554_160


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def conv(uow: FakeUnitOfWork) -> Conversations:
    return Conversations(FakeDatabase(uow), JobSignals())


def session(uow: FakeUnitOfWork) -> int:
    return uow.sessions.insert(f"s{len(uow.sessions.rows)}", "", 0, {}).id


def item(session_id: int, i: int, **over) -> EpisodeInput:
    fields = dict(
        session_id=session_id,
        user_message=f"question {i}",
        ai_response=f"answer {i}",
        metadata={},
        request_id=f"r{i}",
        occur_at=float(BASE + 30 * i),
    )
    fields.update(over)
    return EpisodeInput(**fields)  # type: ignore[arg-type]


async def stream(items: Iterable[EpisodeInput | NexusError]) -> AsyncIterator:
    for it in items:
        yield it


async def run(conv: Conversations, items) -> list[Imported | NexusError]:
    return [outcome for _, outcome in await EpisodeImport(conv).run(stream(items))]


def counts(outcomes) -> tuple[int, int, int, int]:
    """(received, created, replayed, failed), as the answer counts them."""
    done = [o for o in outcomes if isinstance(o, Imported)]
    replayed = sum(o.replayed for o in done)
    return len(outcomes), len(done) - replayed, replayed, len(outcomes) - len(done)


def ids(outcomes) -> list[int]:
    return [o.episode_id if isinstance(o, Imported) else 0 for o in outcomes]


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 4 (IMPORT_BATCH is 256): the same batch edges in fewer items,
    since a fake's savepoint copies the whole fake database for each item."""
    monkeypatch.setattr(episode_import, "IMPORT_BATCH", 4)


async def test_every_item_is_written_in_stream_order_with_its_time(uow, conv, small_batches):
    a, b = session(uow), session(uow)
    # 10 items: three batches, the last one partial, across two sessions.
    items = [item(a if i % 2 == 0 else b, i) for i in range(10)]
    outcomes = await run(conv, items)
    assert counts(outcomes) == (10, 10, 0, 0)
    written = ids(outcomes)
    assert len(set(written)) == 10 and len(uow.episodes.rows) == 10
    # Each id is the episode of its item, with its occur_time: each batch's edges.
    for i in (0, 1, 3, 4, 7, 8, 9):
        episode = uow.episodes.rows[written[i]]
        assert episode.user_message == f"question {i}"
        assert episode.session_id == (a if i % 2 == 0 else b)
        assert episode.occur_at == BASE + 30 * i
    assert sum(e.session_id == a for e in uow.episodes.rows.values()) == 5
    # Their jobs wait behind live traffic's.
    assert {j.priority for j in uow.jobs.rows if j.kind == jobs.EXTRACT_EPISODE} == {jobs.BULK}


async def test_a_resent_import_is_replayed_and_writes_nothing_new(uow, conv, small_batches):
    a = session(uow)
    items = [item(a, i) for i in range(6)]  # two batches
    first = await run(conv, items)
    assert counts(first) == (6, 6, 0, 0)
    queued = len(uow.jobs.rows)
    again = await run(conv, items)
    assert counts(again) == (6, 0, 6, 0)
    assert ids(again) == ids(first)
    assert len(uow.episodes.rows) == 6 and len(uow.jobs.rows) == queued
    # The same request_id twice in one stream: the second is a replay of the first.
    twice = await run(conv, [item(a, 1000), item(a, 1000)])
    assert counts(twice)[1:3] == (1, 1)
    assert ids(twice)[0] == ids(twice)[1] != 0


async def test_a_bad_item_is_its_error_and_writes_nothing_while_the_others_go_on(uow, conv):
    a = session(uow)
    await run(conv, [item(a, 7)])  # r7 is taken
    before = len(uow.episodes.rows)
    converted = InvalidArgument("episode is required in every ImportEpisodesRequest")
    items = [
        item(a, 0),
        item(a, 1, request_id=""),  # required here
        item(a, 2, user_message="  "),
        item(999_999, 3),
        item(a, 4, occur_at=4_102_444_800.0),  # 2100: in the future
        converted,  # the wire's conversion failed: handed back as it is
        item(a, 6, user_message="different text", request_id="r7"),
        item(a, 8, request_id=" r8"),
        item(a, 9),
    ]
    outcomes = await run(conv, items)
    assert counts(outcomes) == (9, 2, 0, 7)
    assert len(uow.episodes.rows) == before + 2
    assert [i for i, eid in enumerate(ids(outcomes)) if eid] == [0, 8]
    expect = {
        1: (InvalidArgument, "request_id"),
        2: (InvalidArgument, "user_message"),
        3: (NotFound, "session 999999"),
        4: (InvalidArgument, "occur_time"),
        5: (InvalidArgument, "episode is required"),
        6: (AlreadyExists, "request_id 'r7'"),
        7: (InvalidArgument, "request_id"),
    }
    for index, (error, words) in expect.items():
        assert isinstance(outcomes[index], error), (index, outcomes[index])
        assert words in outcomes[index].message, (index, outcomes[index].message)
    assert outcomes[5] is converted
    # A rejected item queued no job either: every episode job names a stored episode.
    kinds = (jobs.INDEX_EPISODE, jobs.EXTRACT_EPISODE)
    targets = {j.target_id for j in uow.jobs.rows if j.kind in kinds}
    assert targets == set(uow.episodes.rows)


async def test_more_than_the_limit_keeps_what_came_before_and_says_so(
    uow, conv, small_batches, monkeypatch
):
    monkeypatch.setattr(episode_import, "MAX_IMPORT_EPISODES", 6)
    a = session(uow)
    within = await run(conv, [item(a, i) for i in range(6)])
    assert counts(within)[1] == 6
    with pytest.raises(InvalidArgument) as err:
        await run(conv, [item(a, i) for i in range(6, 14)])
    assert "at most 6 episodes per ImportEpisodes call" in err.value.message
    assert "the first 6 were stored" in err.value.message
    assert len(uow.episodes.rows) == 12  # item 12 (the 7th) and after: not written
    assert {e.user_message for e in uow.episodes.rows.values()} == {
        f"question {i}" for i in range(12)
    }
