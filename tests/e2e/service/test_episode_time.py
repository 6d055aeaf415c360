"""Episode time: occur_time on CreateEpisode, and SearchEpisodes' time window
on keyword, semantic and hybrid search, over each search backend.

The domain's rules of time (a time in the future refused, a retry that names
another time, how a summary pass dates an imported exchange) are tested on
the fakes in tests/unit/test_conversation_rules.py, test_summary_rules.py and
test_validation.py, and how the recall evaluation reads a session's date in
tests/unit/test_episode_time_rules.py; here, the wire's own checks of a
Timestamp, what each store keeps and what each backend's window does."""

from __future__ import annotations

import time

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import wait_until

# Every harness test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

MODES = [
    memory_pb2.SEARCH_MODE_KEYWORD,
    memory_pb2.SEARCH_MODE_SEMANTIC,
    memory_pb2.SEARCH_MODE_HYBRID,
]
DAY = 86_400
# 8 May 2023, 13:56 UTC: a LoCoMo-style session date.
BASE = 1_683_554_160


def ts(seconds: float) -> Timestamp:
    t = Timestamp()
    t.FromNanoseconds(int(seconds * 1e9))
    return t


@pytest.fixture
def h(each_backend):
    """Every test here runs on each search backend (tests/e2e/service/conftest.py)."""
    return each_backend


async def indexed(h):
    async def done():
        sql = "SELECT COUNT(*) FROM jobs WHERE kind = 'index:episodes'"
        return await h.app.db.read_sql(lambda c: c.execute(sql).fetchone()[0]) == 0

    await wait_until(done)


async def code_of(coro) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await coro
    return err.value.code(), err.value.details()


async def episodes_count(h) -> int:
    return await h.app.db.read_sql(
        lambda c: c.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
    )


async def test_occur_time_is_stored_and_returned_and_defaults_to_now(harness):
    """The store's, on each store (the vector backend plays no part)."""
    h = harness
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
    )
    before = time.time()
    now_ep = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=session.id, user_message="hi", ai_response="hello"
        )
    )
    assert before - 1 <= now_ep.occur_time.ToNanoseconds() / 1e9 <= time.time() + 1
    assert now_ep.occur_time == now_ep.create_time
    old = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=session.id,
            user_message="back then",
            ai_response="yes",
            occur_time=ts(BASE + 0.5),
        )
    )
    assert old.occur_time == ts(BASE + 0.5)
    assert old.create_time.seconds >= int(before)
    got = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=old.id))
    assert got.occur_time == ts(BASE + 0.5)
    listed = await h.memory.ListEpisodes(memory_pb2.ListEpisodesRequest(session_id=session.id))
    assert {e.id: e.occur_time.seconds for e in listed.episodes}[old.id] == BASE


async def test_a_time_that_is_no_timestamp_is_refused_by_name_and_writes_nothing(harness):
    """Checked as the request is read (api/convert.py), on CreateEpisode and
    on SearchEpisodes' stream; and the domain's refusals of a time, by their code."""
    h = harness
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
    )
    for occur_time in (Timestamp(seconds=BASE, nanos=-1), Timestamp(seconds=-(10**12))):
        broken = memory_pb2.CreateEpisodeRequest(
            session_id=session.id, user_message="x", occur_time=occur_time
        )
        code, details = await code_of(h.memory.CreateEpisode(broken))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "occur_time" in details
    future = memory_pb2.CreateEpisodeRequest(
        session_id=session.id, user_message="later", occur_time=ts(time.time() + DAY)
    )
    code, details = await code_of(h.memory.CreateEpisode(future))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "occur_time" in details
    assert await episodes_count(h) == 0
    code, details = await code_of(
        search(h, session.id, memory_pb2.SEARCH_MODE_KEYWORD, start=BASE + DAY, end=BASE + DAY)
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "start_time" in details
    bad = memory_pb2.SearchEpisodesRequest(
        query="x", session_id=session.id, end_time=Timestamp(seconds=BASE, nanos=2_000_000_000)
    )
    code, details = await code_of(_drain(h.memory.SearchEpisodes(bad)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "end_time" in details


async def _drain(stream) -> list:
    return [hit async for hit in stream]


async def search(h, session_id, mode, limit=10, start=None, end=None):
    request = memory_pb2.SearchEpisodesRequest(
        query="kubernetes cluster upgrade", session_id=session_id, mode=mode, limit=limit
    )
    if start is not None:
        request.start_time.CopyFrom(ts(start))
    if end is not None:
        request.end_time.CopyFrom(ts(end))
    return [hit async for hit in h.memory.SearchEpisodes(request)]


@pytest.mark.parametrize("mode", MODES)
async def test_search_window_applies_on_every_mode(h, mode):
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
    )
    by_day: dict[int, int] = {}
    # Twelve episodes a day apart with the same words: the window alone decides.
    for day in range(12):
        ep = await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id,
                user_message=f"kubernetes cluster upgrade plan, day {day}",
                ai_response="noted",
                occur_time=ts(BASE + day * DAY),
            )
        )
        by_day[ep.id] = day
    await indexed(h)
    everything = await search(h, session.id, mode, limit=20)
    assert {by_day[x.episode.id] for x in everything} == set(range(12))
    # [day 3, day 6): days 3, 4 and 5, each hit carrying its occur_time.
    window = await search(h, session.id, mode, limit=3, start=BASE + 3 * DAY, end=BASE + 6 * DAY)
    assert sorted(by_day[x.episode.id] for x in window) == [3, 4, 5]
    assert all(x.episode.occur_time.seconds == BASE + by_day[x.episode.id] * DAY for x in window)
    # The end is exclusive to the nanosecond; the start inclusive.
    edge = await search(h, session.id, mode, start=BASE + 3 * DAY, end=BASE + 3 * DAY + 0.001)
    assert [by_day[x.episode.id] for x in edge] == [3]
    # Open on one side.
    late = await search(h, session.id, mode, limit=20, start=BASE + 10 * DAY)
    assert sorted(by_day[x.episode.id] for x in late) == [10, 11]
    early = await search(h, session.id, mode, limit=20, end=BASE + 2 * DAY)
    assert sorted(by_day[x.episode.id] for x in early) == [0, 1]
    assert await search(h, session.id, mode, start=BASE + 20 * DAY) == []


async def test_recall_eval_stores_the_timed_construction_beside_the_readme_one(harness, tmp_path):
    import json

    from nexus_grpc.evaluation.recall import evaluate, session_time

    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a beagle named Rufus"},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely dog"},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Ann", "dia_id": "D2:1", "text": "We painted the kitchen yellow"},
            {"speaker": "Bo", "dia_id": "D2:2", "text": "Bright"},
        ],
        "qa": [
            {"question": "What is the beagle called?", "evidence": ["D1:1"], "category": 4},
            {"question": "What colour is the kitchen?", "evidence": ["D2:1"], "category": 4},
        ],
    }
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(conversation))
    report = await evaluate(
        harness.target,
        [str(path)],
        modes=("keyword",),
        progress_out=None,
        construction="both",
    )
    assert report["constructions"] == ["readme", "timed"]
    assert set(report["modes"]) == {"keyword", "timed:keyword"}
    assert report["modes"]["timed:keyword"]["recall@1"] == 1.0
    assert report["modes"]["keyword"]["recall@1"] == 1.0
    rows = await harness.app.db.read_sql(
        lambda c: c.execute(
            "SELECT user_message, occur_at, created_at FROM episodes ORDER BY id"
        ).fetchall()
    )
    timed = [r for r in rows if not r[0].startswith("[")]
    readme = [r for r in rows if r[0].startswith("[")]
    assert len(timed) == len(readme) == 2
    assert {r[0] for r in timed} == {
        "Ann: I adopted a beagle named Rufus",
        "Ann: We painted the kitchen yellow",
    }
    assert sorted(r[1] for r in timed) == [BASE, session_time("10:37 am on 27 June, 2023")]
    assert all(r[1] == r[2] for r in readme)
