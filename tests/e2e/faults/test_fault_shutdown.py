"""SIGTERM under load, against the real ``nexus-grpc serve``.

Writers (CreateEpisode, several channels, several calls in flight on each),
searchers (SearchEpisodes streams), a health Watch stream and a health Check
poller run while the server gets SIGTERM at a random moment.  One more call,
SummarizeSession, is provably running inside its handler at that moment: the
Ollama stand-in holds its LLM request until the client has seen the server
go NOT_SERVING.  What a client must see (the order of nexus_grpc/server.py's
module doc):

- health turns NOT_SERVING while the server still answers: the Watch stream
  gets NOT_SERVING and ends OK, and Check answers NOT_SERVING before the
  channel goes away, never SERVING again;
- every call ends OK or UNAVAILABLE (a clean refusal a client may retry);
  none is CANCELLED or cut off;
- calls running when SIGTERM arrived (the held one included) finish OK within
  the grace period, and the process exits 0 without needing all of it;
- after a restart, the episodes in SQLite are exactly the acknowledged ones,
  with their text: no acknowledged write lost, and no refused call written.

``make soak`` repeats the cycle many times, with heavier load.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2_grpc as summary_grpc
from tests.ollama_stub import OllamaStub, Reply
from tests.process import ServerProcess, read_only
from tests.support import start_harness

SOAK = os.environ.get("NEXUS_SOAK") == "1"
BASE_SEED = int(os.environ.get("NEXUS_FAULT_SEED") or random.SystemRandom().randrange(2**31))
GRACE = 10.0
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
OK = grpc.StatusCode.OK
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
SEARCH_MODES = (
    memory_pb2.SEARCH_MODE_KEYWORD,
    memory_pb2.SEARCH_MODE_SEMANTIC,
    memory_pb2.SEARCH_MODE_HYBRID,
)
HOLD = "hold-this-summary"
HELD_SUMMARY = "A summary that was in flight at SIGTERM."


class HeldSummary:
    """Ollama stand-in responder: the summary request for the HOLD session
    waits until released; everything else gets the stub's default answer."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()

    def __call__(self, endpoint: str, body: dict) -> Reply | None:
        is_summary = endpoint == "/api/chat" and body.get("format") is None
        if is_summary and HOLD in json.dumps(body.get("messages")):
            self.arrived.set()
            self.release.wait(60)
            return Reply.of(HELD_SUMMARY)
        return None


@dataclass
class Call:
    name: str
    started: float
    ended: float = 0.0
    code: grpc.StatusCode | None = None
    details: str = ""


@dataclass
class Observed:
    """Everything the clients saw, on one clock (time.monotonic)."""

    writes: list[Call] = field(default_factory=list)
    searches: list[Call] = field(default_factory=list)
    sent: dict[str, tuple[int, str]] = field(default_factory=dict)  # rid -> session, text
    acked: dict[str, int] = field(default_factory=dict)  # rid -> episode id
    watch: list[tuple[float, int]] = field(default_factory=list)
    watch_end: grpc.StatusCode | None = None
    checks: list[tuple[float, int | grpc.StatusCode]] = field(default_factory=list)
    held: Call | None = None
    held_session: int = 0
    held_summary: str = ""
    sigterm_at: float = 0.0
    exited_at: float = 0.0
    exit_code: int | None = None


async def _finish(call: Call, coro) -> bool:
    try:
        await coro
    except grpc.aio.AioRpcError as exc:
        call.code, call.details = exc.code(), exc.details() or ""
    else:
        call.code = OK
    call.ended = time.monotonic()
    return call.code == OK


async def _sigterm_under_load(
    data: Path, rng: random.Random, *, cycle: int, channels: int, min_acks: int
) -> Observed:
    seen = Observed()
    held = HeldSummary()
    ollama = OllamaStub(default=Reply.of({"entities": [], "relationships": []}), responder=held)
    ollama.start()
    server = ServerProcess(data, "--grace-seconds", str(GRACE), "--ollama-url", ollama.url).start()
    enough = asyncio.Event()
    watching = asyncio.Event()
    not_serving_checked = asyncio.Event()
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = memory_grpc.MemoryServiceStub(channel)
            sessions = [
                (
                    await stub.CreateSession(
                        memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
                    )
                ).id
                for _ in range(channels + 1)
            ]
            seen.held_session = sessions[-1]
            await stub.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(
                    session_id=seen.held_session, user_message=f"{HOLD}: what we decided"
                )
            )

        async def writer(stub: memory_grpc.MemoryServiceStub, session_id: int, name: str) -> None:
            n = 0
            while True:
                rid = f"t{cycle}-{name}-{n}"
                n += 1
                text = f"shutdown note {rid}"
                seen.sent[rid] = (session_id, text)
                call = Call(rid, time.monotonic())
                seen.writes.append(call)
                req = memory_pb2.CreateEpisodeRequest(
                    session_id=session_id, user_message=text, ai_response="ok", request_id=rid
                )
                reply: list[memory_pb2.Episode] = []

                async def create(req=req, reply=reply) -> None:
                    reply.append(await stub.CreateEpisode(req, timeout=GRACE + 20))

                if not await _finish(call, create()):
                    return  # a refused client stops (one that retried would hold the drain)
                seen.acked[rid] = reply[0].id
                if len(seen.acked) >= min_acks:
                    enough.set()

        async def searcher(stub: memory_grpc.MemoryServiceStub, session_id: int, name: str) -> None:
            for n in range(1_000_000):
                mode = SEARCH_MODES[n % len(SEARCH_MODES)]
                call = Call(f"{name}-{n}", time.monotonic())
                seen.searches.append(call)
                req = memory_pb2.SearchEpisodesRequest(
                    query="shutdown note", session_id=session_id, mode=mode, limit=20
                )

                async def search(req=req) -> None:
                    async for _ in stub.SearchEpisodes(req, timeout=GRACE + 20):
                        pass

                if not await _finish(call, search()):
                    return

        async def watcher(hstub: health_pb2_grpc.HealthStub) -> None:
            stream = hstub.Watch(health_pb2.HealthCheckRequest(), timeout=GRACE + 30)
            try:
                async for reply in stream:
                    seen.watch.append((time.monotonic(), reply.status))
                    watching.set()
                seen.watch_end = await stream.code()
            except grpc.aio.AioRpcError as exc:
                seen.watch_end = exc.code()

        async def checker(hstub: health_pb2_grpc.HealthStub) -> None:
            while True:
                try:
                    reply = await hstub.Check(health_pb2.HealthCheckRequest(), timeout=5)
                except grpc.aio.AioRpcError as exc:
                    seen.checks.append((time.monotonic(), exc.code()))
                    return
                seen.checks.append((time.monotonic(), reply.status))
                if reply.status == NOT_SERVING:
                    not_serving_checked.set()
                await asyncio.sleep(0.01)  # an observer's poll rate, not a synchronisation

        async def summarize(summaries: summary_grpc.SummaryServiceStub) -> None:
            seen.held = Call("SummarizeSession", time.monotonic())
            reply: list[summary_pb2.Summary] = []

            async def call() -> None:
                reply.append(
                    await summaries.SummarizeSession(
                        summary_pb2.SummarizeSessionRequest(session_id=seen.held_session),
                        timeout=GRACE + 20,
                    )
                )

            if await _finish(seen.held, call()):
                seen.held_summary = reply[0].content

        chans = [grpc.aio.insecure_channel(server.target) for _ in range(channels + 3)]
        try:
            health_stubs = [health_pb2_grpc.HealthStub(ch) for ch in chans[-2:]]
            stubs = [memory_grpc.MemoryServiceStub(ch) for ch in chans[:channels]]
            tasks = [asyncio.create_task(watcher(health_stubs[0]))]
            # The Watch stream is up (it has said SERVING) before the load starts.
            await asyncio.wait_for(watching.wait(), 30)
            tasks.append(asyncio.create_task(checker(health_stubs[1])))
            for i, s in enumerate(stubs):
                tasks += [asyncio.create_task(writer(s, sessions[i], f"c{i}w{w}")) for w in (0, 1)]
                if i % 2 == 0:
                    tasks.append(asyncio.create_task(searcher(s, sessions[i], f"c{i}s")))
            await asyncio.wait_for(enough.wait(), 120)
            tasks.append(asyncio.create_task(summarize(summary_grpc.SummaryServiceStub(chans[-3]))))
            # Its LLM request has reached Ollama: the call is inside its handler.
            assert await asyncio.to_thread(held.arrived.wait, 30), "summary never reached Ollama"
            # The random moment (not a synchronisation).
            await asyncio.sleep(rng.uniform(0.0, 0.1))
            assert server.proc is not None
            seen.sigterm_at = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            # Hold the call until a client has been told NOT_SERVING by a Check
            # (the server still answering), then let it finish in the grace period.
            try:
                await asyncio.wait_for(not_serving_checked.wait(), GRACE)
            except TimeoutError:
                raise AssertionError(
                    f"no Check answered NOT_SERVING after SIGTERM: {seen.checks[-3:]}"
                ) from None
            held.release.set()
            seen.exit_code = await asyncio.to_thread(server.proc.wait, GRACE + 30)
            seen.exited_at = time.monotonic()
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
        finally:
            for ch in chans:
                await ch.close()
    finally:
        held.release.set()
        server.kill()
        ollama.stop()
    return seen


def _check_clients(seen: Observed, seed: int) -> dict:
    """The client-side half of the pass criteria; returns this cycle's figures."""
    tag = f"seed {seed}"
    assert seen.exit_code == 0, tag
    # Nothing (in particular no open Watch stream) held the process for the grace period.
    took = seen.exited_at - seen.sigterm_at
    assert took < GRACE, f"{tag}: exit took {took:.1f}s"

    # Watch: SERVING, then NOT_SERVING after the signal, then the stream ends OK.
    statuses = [s for _, s in seen.watch]
    assert statuses == [SERVING, NOT_SERVING], f"{tag}: watch saw {statuses}"
    not_serving_at = seen.watch[1][0]
    assert not_serving_at > seen.sigterm_at
    assert seen.watch_end == OK, f"{tag}: watch ended {seen.watch_end}"

    # Check: answered NOT_SERVING (the server still answering after turning it),
    # never SERVING again, and only then did the channel go away.  Health is
    # never refused (and does not hold the drain open), so a poll that lands
    # just as the listener closes may be CANCELLED by grpc core instead.
    answers = [a for _, a in seen.checks]
    check_end = answers[-1]
    assert check_end in (UNAVAILABLE, grpc.StatusCode.CANCELLED), answers[-3:]
    answers = answers[:-1]
    assert all(isinstance(a, int) for a in answers), f"{tag}: {answers}"
    assert NOT_SERVING in answers, f"{tag}: Check never answered NOT_SERVING"
    first = answers.index(NOT_SERVING)
    assert set(answers[:first]) == {SERVING} and set(answers[first:]) == {NOT_SERVING}

    # The call held inside its handler across SIGTERM finished OK, with its answer.
    assert seen.held is not None and seen.held.code == OK, f"{tag}: {seen.held}"
    assert seen.held.started < seen.sigterm_at < seen.held.ended
    assert seen.held_summary == HELD_SUMMARY

    # Every call ends OK or with a clean refusal.
    for call in seen.writes + seen.searches:
        assert call.code in (OK, UNAVAILABLE), f"{tag}: {call}"
        if call.code == UNAVAILABLE:
            assert call.ended >= seen.sigterm_at, f"{tag}: refused before SIGTERM: {call}"
    finished = [c for c in seen.writes if c.code == OK and c.started < seen.sigterm_at < c.ended]
    refused = [c for c in seen.writes + seen.searches if c.code == UNAVAILABLE]
    # Writers kept calling while the held call kept the server draining: the
    # gate, not a closed socket, turned them away.
    assert any("shutting down" in c.details for c in refused), f"{tag}: {refused[:3]}"
    return {
        "acked": len(seen.acked),
        "in_flight_ok": len(finished),
        "searches_in_flight_ok": sum(
            1 for c in seen.searches if c.code == OK and c.started < seen.sigterm_at < c.ended
        ),
        "refused_by_gate": sum(1 for c in refused if "shutting down" in c.details),
        "refused_no_listener": sum(1 for c in refused if "shutting down" not in c.details),
        "not_serving_s": not_serving_at - seen.sigterm_at,
        "not_serving_checks": answers.count(NOT_SERVING),
        "exit_s": took,
        "check_end": check_end.name,
    }


def _check_sqlite(data: Path, seen: list[Observed], seed: int) -> None:
    """Exactly the acknowledged writes are stored, each with its text; and so
    is the summary that was in flight at SIGTERM."""
    sent = {rid: texts for s in seen for rid, texts in s.sent.items()}
    acked = {rid: ep for s in seen for rid, ep in s.acked.items()}
    with read_only(data / "nexus.sqlite3") as conn:
        rows = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT request_id, id, session_id, user_message FROM episodes"
                " WHERE request_id IS NOT NULL"
            )
        }
        for s in seen:
            summaries = conn.execute(
                "SELECT content FROM summaries WHERE session_id = ?", (s.held_session,)
            ).fetchall()
            assert summaries == [(HELD_SUMMARY,)], f"seed {seed}: {summaries}"
    lost = sorted(set(acked) - set(rows))
    assert not lost, f"seed {seed}: acknowledged but lost: {lost[:10]}"
    unacked = sorted(set(rows) - set(acked))
    assert not unacked, f"seed {seed}: written but the client was refused: {unacked[:10]}"
    for rid, episode_id in acked.items():
        assert rows[rid] == (episode_id, *sent[rid]), f"seed {seed}: {rid}"


async def _restart_and_read_back(data: Path, seen: list[Observed]) -> None:
    """The restarted server serves every acknowledged episode."""
    server = ServerProcess(data).start()
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = memory_grpc.MemoryServiceStub(channel)
            for s in seen:
                for rid in sorted(s.acked)[:: max(1, len(s.acked) // 10)]:
                    ep = await stub.GetEpisode(memory_pb2.GetEpisodeRequest(id=s.acked[rid]))
                    assert (ep.session_id, ep.user_message) == s.sent[rid]
    finally:
        assert server.terminate() == 0


async def _cycles(data: Path, n: int, channels: int, min_acks: int) -> list[dict]:
    print(f"\nSIGTERM under load: seed {BASE_SEED} (replay with NEXUS_FAULT_SEED={BASE_SEED})")
    rng = random.Random(BASE_SEED)
    observed: list[Observed] = []
    figures = []
    for cycle in range(n):
        seen = await _sigterm_under_load(
            data, rng, cycle=cycle, channels=channels, min_acks=min_acks
        )
        observed.append(seen)
        figures.append(_check_clients(seen, BASE_SEED))
        _check_sqlite(data, observed, BASE_SEED)
    await _restart_and_read_back(data, observed)
    return figures


def _report(figures: list[dict], channels: int) -> None:
    def span(key: str, fmt: str = "{:.0f}") -> str:
        values = [f[key] for f in figures]
        return f"{fmt.format(min(values))}-{fmt.format(max(values))}"

    print(
        f"SIGTERM x{len(figures)} under load ({channels} writer channels x2 calls,"
        f" {(channels + 1) // 2} searchers, health Watch + Check):"
        f" {sum(f['acked'] for f in figures)} writes acknowledged, 0 lost,"
        " 0 written unacknowledged;"
        f" a SummarizeSession held in its handler across SIGTERM finished OK in every cycle;"
        f" writes in flight at SIGTERM that finished OK {span('in_flight_ok')} per cycle"
        f" ({sum(f['in_flight_ok'] for f in figures)} in all), searches"
        f" {sum(f['searches_in_flight_ok'] for f in figures)};"
        f" refused UNAVAILABLE by the gate {sum(f['refused_by_gate'] for f in figures)},"
        f" by the closed listener {sum(f['refused_no_listener'] for f in figures)},"
        f" CANCELLED 0; Watch saw NOT_SERVING {span('not_serving_s', '{:.3f}')}s after SIGTERM;"
        f" Check answered NOT_SERVING {span('not_serving_checks')} times before the channel closed"
        f" (then {dict(Counter(f['check_end'] for f in figures))});"
        f" exit {span('exit_s', '{:.2f}')}s after SIGTERM (grace {GRACE:.0f}s)"
    )


async def test_sigterm_under_load_finishes_in_flight_calls_and_loses_no_ack(tmp_path):
    figures = await _cycles(tmp_path / "data", n=1, channels=4, min_acks=150)
    _report(figures, channels=4)


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_sigterm_under_load_soak(tmp_path):
    figures = await _cycles(tmp_path / "data", n=20, channels=8, min_acks=400)
    _report(figures, channels=8)


# In-process checks of the same shutdown path ---------------------------------------


async def test_health_watch_streams_say_not_serving_and_end_ok_at_shutdown(tmp_path):
    h = await start_harness(tmp_path / "data")
    health = health_pb2_grpc.HealthStub(h.channel)
    memory = "nexus.memory.v1.MemoryService"
    whole, one, unknown = (
        health.Watch(health_pb2.HealthCheckRequest(service=name))
        for name in ("", memory, "no.such.Service")
    )
    try:
        assert (await whole.read()).status == SERVING
        assert (await one.read()).status == SERVING
        assert (await unknown.read()).status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        await asyncio.wait_for(h.running.stop(5), 10)
        for call in (whole, one):
            assert (await call.read()).status == NOT_SERVING
            assert await call.read() is grpc.aio.EOF
            assert await call.code() == OK
        # Unknown stays unknown (nothing to report), and the stream still ends OK.
        assert await unknown.read() is grpc.aio.EOF
        assert await unknown.code() == OK
    finally:
        await h.channel.close()


async def test_a_call_outliving_the_grace_period_is_cancelled_and_stop_returns(tmp_path):
    held = HeldSummary()
    with OllamaStub(responder=held) as ollama:
        h = await start_harness(tmp_path / "data", ollama_url=ollama.url)
        try:
            s = await h.memory.CreateSession(
                memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
            )
            await h.memory.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(session_id=s.id, user_message=f"{HOLD}: a long one")
            )
            call = h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=s.id))
            assert await asyncio.to_thread(held.arrived.wait, 10)
            started = time.monotonic()
            await asyncio.wait_for(h.running.stop(0.5), 10)
            took = time.monotonic() - started
            assert 0.5 <= took < 3.0, took
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call
            assert info.value.code() in (grpc.StatusCode.CANCELLED, UNAVAILABLE)
        finally:
            held.release.set()
            await h.channel.close()
