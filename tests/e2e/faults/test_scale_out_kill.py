"""Three instances on one PostgreSQL, one of them killed with -9 mid-ingest.

Three real ``nexus-grpc serve`` processes share one database (tests/pg.py)
and the Ollama stand-in (embedding and extraction, each extraction slowed so
that jobs are running when the kill lands). Writers spread CreateEpisode
calls over all three; the first instance gets SIGKILL part way, and the calls
it cut off are retried, with their request_id, on a survivor. Then:

- every acknowledged episode is in the database with the text sent, and
  nothing else is;
- the survivors find each one by keyword;
- each is embedded exactly once: one pgvector row per episode, no other;
- each is extracted (state DONE, a DONE event);
- the jobs the killed instance held running (``jobs.leased_by``) were taken
  over by the survivors once their leases ran out, and finished.
"""

from __future__ import annotations

import asyncio
import time

import grpc
import psycopg
import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from tests.graph_support import ALICE
from tests.ollama_stub import OllamaStub, Reply
from tests.process import ServerProcess

INSTANCES = 3
PER_INSTANCE = 24
LEASE = 2.0  # seconds: a dead instance's jobs come back this soon
DONE = 2  # JobState.DONE


def _rows(url: str, sql: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


async def _wait_for(predicate, timeout: float, what: str, detail=lambda: "") -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what} {detail()}")
        await asyncio.sleep(0.2)


@pytest.mark.timeout(300)
async def test_three_instances_one_killed_mid_ingest_lose_nothing(tmp_path, pg_url):
    stub = OllamaStub(default=Reply.of(ALICE, delay=0.4), embed_dim=768)

    with stub:
        args = (
            "--database-url", pg_url, "--embedder", "ollama", "--ollama-url", stub.url,
            "--job-lease-seconds", str(LEASE), "--vector-prewarm-mb", "0",
        )  # fmt: skip
        servers = [ServerProcess(tmp_path / f"i{n}", *args).start() for n in range(INSTANCES)]
        victim = servers[0]
        channels = [grpc.aio.insecure_channel(s.target) for s in servers]
        try:
            stubs = [memory_grpc.MemoryServiceStub(c) for c in channels]
            session = await stubs[1].CreateSession(memory_pb2.CreateSessionRequest())
            acked: dict[str, int] = {}
            cut_off: list[str] = []
            held_at_kill: list[tuple] = []
            killed = asyncio.Event()

            async def writer(n: int) -> None:
                for i in range(PER_INSTANCE):
                    rid = f"i{n}-{i}"
                    request = memory_pb2.CreateEpisodeRequest(
                        session_id=session.id, user_message=f"note {rid} zebra{n}x{i}",
                        ai_response="ok", request_id=rid,
                    )  # fmt: skip
                    if n == 0 and killed.is_set():
                        cut_off.append(rid)
                        continue
                    try:
                        acked[rid] = (await stubs[n].CreateEpisode(request, timeout=30)).id
                    except grpc.aio.AioRpcError as exc:
                        assert n == 0 and exc.code() == grpc.StatusCode.UNAVAILABLE, exc
                        cut_off.append(rid)
                    if n == 0 and i == PER_INSTANCE // 2:
                        # Mid-ingest: the victim holds running extraction jobs.
                        await _wait_for(
                            lambda: _held_by(pg_url, victim), 20, "the victim running jobs"
                        )
                        held_at_kill.extend(_held_by(pg_url, victim))
                        victim.sigkill()
                        killed.set()

            await asyncio.gather(*(writer(n) for n in range(INSTANCES)))
            assert killed.is_set() and held_at_kill
            # The calls the kill cut off, retried on a survivor with their request_id.
            for rid in cut_off:
                n, i = (int(x) for x in rid[1:].split("-"))
                request = memory_pb2.CreateEpisodeRequest(
                    session_id=session.id, user_message=f"note {rid} zebra{n}x{i}",
                    ai_response="ok", request_id=rid,
                )  # fmt: skip
                acked[rid] = (await stubs[1].CreateEpisode(request, timeout=30)).id
            assert len(acked) == INSTANCES * PER_INSTANCE

            # The survivors drain every job, the victim's included (after its leases).
            await _wait_for(
                lambda: not _rows(
                    pg_url,
                    "SELECT 1 FROM jobs WHERE kind IN ('index:episodes', 'extract:episode')"
                    " AND state != 'failed'",
                ),
                90,
                "the index and extraction backlog drained",
                lambda: _rows(
                    pg_url,
                    "SELECT kind, state, attempts, left(last_error, 200),"
                    " lease_until - EXTRACT(EPOCH FROM now()), leased_by FROM jobs LIMIT 20",
                ),
            )
            failed = _rows(pg_url, "SELECT kind, last_error FROM jobs WHERE state = 'failed'")
            assert not failed
            stored = dict(_rows(pg_url, "SELECT request_id, id FROM episodes"))
            assert stored == acked  # every acknowledged episode, and nothing else
            texts = dict(_rows(pg_url, "SELECT request_id, user_message FROM episodes"))
            assert all(texts[rid].startswith(f"note {rid} ") for rid in acked)

            points = [r[0] for r in _rows(pg_url, "SELECT id FROM vectors_episodes ORDER BY id")]
            assert points == sorted(acked.values())  # each embedded exactly once

            states = _rows(pg_url, "SELECT DISTINCT extract_state FROM episodes")
            assert states == [(DONE,)]
            extracted = {r[0] for r in _rows(
                pg_url, "SELECT episode_id FROM extraction_events WHERE status = 1"
            )}  # fmt: skip
            assert extracted == set(acked.values())

            # The jobs the victim held when it died finished on the survivors.
            taken = [row[0] for row in held_at_kill]
            assert not _rows(pg_url, "SELECT 1 FROM jobs WHERE id = ANY(%s)", (taken,))

            # Found by keyword from each survivor.
            for n in (1, 2):
                for rid, episode_id in list(acked.items())[:: 7]:
                    word = f"zebra{rid[1:].replace('-', 'x')}"
                    hits = [
                        hit.episode.id
                        async for hit in stubs[n].SearchEpisodes(
                            memory_pb2.SearchEpisodesRequest(
                                query=word,
                                session_id=session.id,
                                mode=memory_pb2.SEARCH_MODE_KEYWORD,
                            )
                        )
                    ]
                    # First: its own text; a neighbour may follow (its context
                    # holds the turns around it).
                    assert hits[0] == episode_id, (rid, hits)
        finally:
            for channel in channels:
                await channel.close()
            for s in servers:
                s.kill()


def _held_by(url: str, server: ServerProcess) -> list[tuple]:
    """Running extraction jobs whose lease ``server``'s process holds."""
    assert server.proc is not None
    return _rows(
        url,
        "SELECT id, target_id FROM jobs WHERE state = 'running' AND kind = 'extract:episode'"
        " AND leased_by LIKE %s",
        (f"%:{server.proc.pid}",),
    )
