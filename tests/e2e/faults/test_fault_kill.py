"""kill -9 during ingest, five times over, against the real ``nexus-grpc serve``.

Several clients (each its own channel, several calls in flight on each) write
episodes; at a random moment (a random number of acknowledgements into the
round, then a random delay) the server gets SIGKILL, and is started again.
After the fifth kill and a last restart:

- every acknowledged episode is in SQLite with the text that was sent, and
  nothing else is (each call the kill cut off is retried with its
  request_id, which must return the first episode if it had committed);
- ``PRAGMA integrity_check`` and the FTS5 integrity check pass;
- the index backlog drains: every episode is in the vector index exactly
  once, and the index holds as many points as SQLite holds episodes.

The kill moments are random but seeded: the seed is printed, and
``NEXUS_FAULT_SEED=<seed>`` replays the same schedule (round sizes, kill
points and delays; thread timing still varies).  The quick version
(``make test``) makes 200 CreateEpisode calls; ``make soak`` makes 2,000.
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.vectors import EdgeVectorIndex
from tests.process import ServerProcess, read_only, wait_queue_empty

SOAK = os.environ.get("NEXUS_SOAK") == "1"
BASE_SEED = int(os.environ.get("NEXUS_FAULT_SEED") or random.SystemRandom().randrange(2**31))
KILLS = 5
CLIENTS = 4  # channels
CALLS_PER_CLIENT = 2  # concurrent calls on each channel
MAX_KILL_DELAY = 0.05  # seconds after the round's ack threshold
WORDS = ("harbor", "quartz", "lantern", "meadow", "cobalt", "falcon", "juniper", "saffron")
DONE = 2  # JobState.DONE in the episodes table


@dataclass
class Ledger:
    """What the clients know: the only truth a durability check may use."""

    sent: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # rid -> session, texts
    acked: dict[str, int] = field(default_factory=dict)  # rid -> episode id
    rounds: list[dict] = field(default_factory=list)


def _texts(rid: str) -> tuple[str, str]:
    return f"crash note {rid} {WORDS[zlib.crc32(rid.encode()) % len(WORDS)]}", f"kept {rid}"


async def _ingest_until_killed(
    server: ServerProcess,
    sessions: list[int],
    ledger: Ledger,
    rng: random.Random,
    round_no: int,
    budget: int,
    *,
    kill: bool = True,
) -> list[str]:
    """Issue up to ``budget`` calls; with ``kill``, SIGKILL once a random number
    of them has been issued, plus a random delay.  Returns the request ids the
    kill cut off."""
    issued = acks = 0
    kill_at = rng.randint(max(1, budget // 3), budget) if kill else 0
    reached = asyncio.Event()
    killed = False
    cut_off: list[str] = []
    unexpected: list[str] = []

    async def writer(stub: memory_grpc.MemoryServiceStub, session_id: int, name: str) -> None:
        nonlocal acks, issued
        n = 0
        while not killed and issued < budget:
            issued += 1
            if kill and issued >= kill_at:
                reached.set()
            rid = f"k{round_no}-{name}-{n}"
            n += 1
            user, ai = _texts(rid)
            ledger.sent[rid] = (session_id, user, ai)
            try:
                ep = await stub.CreateEpisode(
                    memory_pb2.CreateEpisodeRequest(
                        session_id=session_id, user_message=user, ai_response=ai, request_id=rid
                    ),
                    timeout=60,
                )
            except grpc.aio.AioRpcError as exc:
                if killed and exc.code() == grpc.StatusCode.UNAVAILABLE:
                    cut_off.append(rid)
                else:
                    unexpected.append(f"{rid}: {exc.code().name} {exc.details()} killed={killed}")
                return
            ledger.acked[rid] = ep.id
            acks += 1

    async def killer() -> None:
        nonlocal killed
        await reached.wait()
        # The random kill moment (not a synchronisation): lands mid-call, mid-commit
        # or mid-index-batch, wherever the writers and the indexer happen to be.
        await asyncio.sleep(rng.uniform(0.0, MAX_KILL_DELAY))
        killed = True
        server.sigkill()

    channels = [grpc.aio.insecure_channel(server.target) for _ in range(CLIENTS)]
    try:
        writers = [
            writer(memory_grpc.MemoryServiceStub(ch), sessions[c], f"c{c}w{w}")
            for c, ch in enumerate(channels)
            for w in range(CALLS_PER_CLIENT)
        ]
        await asyncio.wait_for(asyncio.gather(*([killer()] if kill else []), *writers), 300)
    finally:
        for ch in channels:
            await ch.close()
    if kill:
        assert server.proc is not None
        await asyncio.to_thread(server.proc.wait, 30)
    assert not unexpected, f"seed {BASE_SEED}: calls failed other than by the kill: {unexpected}"
    if kill:
        ledger.rounds.append(
            {"issued": issued, "kill_at": kill_at, "acks": acks, "cut_off": len(cut_off)}
        )
    return cut_off


async def _retry_cut_off(server: ServerProcess, ledger: Ledger, cut_off: list[str]) -> int:
    """Retry each cut-off call with its request_id; returns how many had committed."""
    if not cut_off:
        return 0
    with read_only(server.sqlite_path) as conn:
        committed = dict(
            conn.execute(
                f"SELECT request_id, id FROM episodes WHERE request_id IN"
                f" ({','.join('?' * len(cut_off))})",
                cut_off,
            ).fetchall()
        )
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = memory_grpc.MemoryServiceStub(channel)
        for rid in cut_off:
            session_id, user, ai = ledger.sent[rid]
            ep = await stub.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(
                    session_id=session_id, user_message=user, ai_response=ai, request_id=rid
                ),
                timeout=30,
            )
            if rid in committed:
                assert ep.id == committed[rid], f"seed {BASE_SEED}: retry of {rid} duplicated it"
            ledger.acked[rid] = ep.id
    return len(committed)


async def _kill_nine_rounds(data: Path, total: int, drain_timeout: float) -> dict:
    rng = random.Random(BASE_SEED)
    print(f"\nkill -9 soak: seed {BASE_SEED} (replay with NEXUS_FAULT_SEED={BASE_SEED})")
    ledger = Ledger()
    server = ServerProcess(data).start()
    figures: dict = {"seed": BASE_SEED, "restart_s": [], "durable_cut_off": 0, "requeued": 0}
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = memory_grpc.MemoryServiceStub(channel)
            sessions = [
                (
                    await stub.CreateSession(
                        memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
                    )
                ).id
                for _ in range(CLIENTS)
            ]
        # Random round sizes; a round's unused calls (the kill came first) carry
        # over, and what is left after the fifth kill is written to the
        # restarted server, so exactly ``total`` calls are made in all.
        weights = [rng.uniform(0.5, 1.5) for _ in range(KILLS)]
        for round_no in range(KILLS):
            remaining = total - len(ledger.sent)
            budget = max(1, round(remaining * weights[round_no] / sum(weights[round_no:])))
            cut_off = await _ingest_until_killed(server, sessions, ledger, rng, round_no, budget)
            started = time.monotonic()
            server = ServerProcess(data).start()
            figures["restart_s"].append(time.monotonic() - started)
            figures["durable_cut_off"] += await _retry_cut_off(server, ledger, cut_off)
        if total > len(ledger.sent):
            await _ingest_until_killed(
                server, sessions, ledger, rng, KILLS, total - len(ledger.sent), kill=False
            )
        # The start-up reconcile requeues whatever the index lost to the kills;
        # only after it has run does an empty queue mean "all indexed".
        found = await server.wait_for_log(r"start-up reconcile: (\d+) requeued, (\d+) orphans")
        figures["requeued"] = int(found.group(1))
        figures["orphans"] = int(found.group(2))
        drain_started = time.monotonic()
        pending, failed = await wait_queue_empty(server.target, "index:episodes", drain_timeout)
        figures["drain_s"] = time.monotonic() - drain_started
        assert failed == 0, f"seed {BASE_SEED}: {failed} index jobs dead-lettered"
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = memory_grpc.MemoryServiceStub(channel)
            # Spot checks through the API: the row, and FTS finding it by its words.
            for rid in sorted(ledger.acked)[:: max(1, len(ledger.acked) // 20)]:
                ep = await stub.GetEpisode(memory_pb2.GetEpisodeRequest(id=ledger.acked[rid]))
                assert (ep.session_id, ep.user_message, ep.ai_response) == ledger.sent[rid]
                assert ep.embedding_state == memory_pb2.JOB_STATE_DONE
                hits = [
                    h.episode.id
                    async for h in stub.SearchEpisodes(
                        memory_pb2.SearchEpisodesRequest(
                            query=f"crash note {rid}",
                            session_id=ep.session_id,
                            mode=memory_pb2.SEARCH_MODE_KEYWORD,
                            limit=5,
                        )
                    )
                ]
                assert ep.id in hits, f"seed {BASE_SEED}: FTS does not find {rid}"
    finally:
        if server.running():
            assert server.terminate() == 0, server.log_tail()
    figures.update(
        calls=len(ledger.sent),
        acked=len(ledger.acked),
        cut_off=sum(r["cut_off"] for r in ledger.rounds),
        rounds=ledger.rounds,
    )
    await _check_files(data, ledger)
    return figures


async def _check_files(data: Path, ledger: Ledger) -> None:
    with sqlite3.connect(data / "nexus.sqlite3") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('integrity-check')")
        rows = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT request_id, id, session_id, user_message, ai_response, embed_state"
                " FROM episodes"
            )
        }
        left = conn.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'index:episodes'").fetchone()[0]
    # Every acknowledged episode, with its text; and nothing nobody was told about
    # (each cut-off call was retried, so it is acknowledged too).
    missing = sorted(set(ledger.acked) - set(rows))
    assert not missing, f"seed {BASE_SEED}: acknowledged but lost: {missing[:10]}"
    assert set(rows) == set(ledger.acked), f"seed {BASE_SEED}: rows nobody acknowledged"
    for rid, episode_id in ledger.acked.items():
        assert rows[rid][0] == episode_id, f"seed {BASE_SEED}: {rid} changed id"
        assert rows[rid][1:4] == ledger.sent[rid], f"seed {BASE_SEED}: {rid} text differs"
    assert {r[4] for r in rows.values()} == {DONE}, "episodes left unindexed"
    assert left == 0
    ids = sorted(r[0] for r in rows.values())
    index = EdgeVectorIndex(data / "vectors")
    try:
        points: list[int] = []
        async for page in index.ids("episodes"):
            points += page
        assert len(points) == len(set(points)), "duplicate points in the index"
        assert sorted(points) == ids
        assert await index.count("episodes") == len(ids)
    finally:
        await index.close()


def _report(figures: dict) -> None:
    restarts = figures["restart_s"]
    print(
        f"kill -9 x{KILLS}: {figures['calls']} CreateEpisode calls, {figures['acked']} acknowledged"
        f" and all present; {figures['cut_off']} cut off by the kills, of which"
        f" {figures['durable_cut_off']} had committed (their request_id retry returned them);"
        f" killed after {[r['kill_at'] for r in figures['rounds']]} calls issued (+0-50 ms);"
        f" restart to serving {min(restarts):.2f}-{max(restarts):.2f}s;"
        f" start-up reconcile requeued {figures['requeued']}, orphans {figures['orphans']};"
        f" index drained in {figures['drain_s']:.1f}s; seed {figures['seed']}"
    )


async def test_acknowledged_episodes_survive_five_kill_9s_and_all_reach_the_index(tmp_path):
    figures = await _kill_nine_rounds(tmp_path / "data", total=200, drain_timeout=120)
    _report(figures)


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_two_thousand_writes_survive_five_kill_9s_and_all_reach_the_index(tmp_path):
    figures = await _kill_nine_rounds(tmp_path / "data", total=2000, drain_timeout=900)
    _report(figures)
