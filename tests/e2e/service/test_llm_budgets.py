"""Tenants' daily LLM token budgets (domain/budgets.py), through the real
server with the Ollama stand-in: past its budget a tenant's LLM jobs wait
for the next UTC day, saying why, while other tenants' work keeps flowing;
its selections rank by similarity and its summaries are refused; searches
and the figures are unaffected.

The budget's own rules (the day, what counts, which jobs are held, which
lines each key is told, summaries refused without asking the model, held
work resumed) are tests/unit/test_budgets.py's, on the fakes; here are the
workers, the RPCs' status codes and details, and doctor."""

from __future__ import annotations

import io
import json
import time

import grpc
import pytest
from grpc_status import rpc_status

from nexus_grpc.core import jobs
from nexus_grpc.domain.budgets import next_day
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.ops.against_server.doctor import doctor
from tests.graph_support import EMPTY, speed_up
from tests.support import Harness, bearer, index_idle, start_harness, take, wait_until

BOTH_STORES = True
STUB_DEFAULT_REPLY = EMPTY
A_KEY = "tenant-a-key-000000000001"
B_KEY = "tenant-b-key-000000000001"
ADMIN_KEY = "ops-admin-key-00000000001"
A, B, ADMIN = bearer(A_KEY), bearer(B_KEY), bearer(ADMIN_KEY)
QUEUED = 1000
A_BUDGET = 100  # tokens a day: one extraction spends more


async def _start(tmp_path, stub, store_settings, a_budget: int = A_BUDGET) -> Harness:
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "tenants": {"a": {"llm_tokens_per_day": a_budget}},
                "keys": [
                    {"key": A_KEY, "name": "a", "users": "*"},
                    {"key": B_KEY, "name": "b", "users": "*"},
                    {"key": ADMIN_KEY, "name": "ops", "users": "*", "admin": True},
                ],
            }
        )
    )
    harness = await start_harness(
        tmp_path / "data",
        ollama_url=stub.url,
        auth_keys_file=str(keys),
        # Every other tenant's budget: more than this test spends.
        llm_tokens_per_day=1_000_000,
        job_max_attempts=3,
        **store_settings,
    )
    speed_up(harness)
    return harness


@pytest.fixture
async def h(tmp_path, stub, store_settings):
    harness = await _start(tmp_path, stub, store_settings)
    yield harness
    await harness.close()


async def _session(h: Harness, key, project_id: int = 0) -> int:
    made = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project_id)),
        metadata=key,
    )
    return made.id


async def _extracted(h: Harness, key, session_id: int, user: str) -> graph_pb2.ExtractionEvent:
    ep = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session_id, user_message=user, ai_response="ok"),
        metadata=key,
    )
    call = h.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(episode_id=ep.id), metadata=key
    )
    try:
        [event] = await take(call, 1, 30)
        return event
    finally:
        call.cancel()


async def _import(h: Harness, key, session_id: int, n: int) -> list[int]:
    async def items():
        for i in range(n):
            yield memory_pb2.ImportEpisodesRequest(
                episode=memory_pb2.CreateEpisodeRequest(
                    session_id=session_id,
                    user_message=f"bulk message number {i} from tenant a",
                    ai_response="ok",
                    request_id=f"bulk-{i}",
                )
            )

    answer = await h.memory.ImportEpisodes(items(), metadata=key)
    assert answer.created == n
    return list(answer.episode_ids)


async def _a_jobs(h: Harness, session_id: int) -> list[tuple]:
    """tenant a's extraction jobs of its bulk session: (state, attempts, run_after)."""
    return await h.app.db.read_sql(
        lambda c: c.execute(
            "SELECT j.state, j.attempts, j.run_after FROM jobs j"
            " JOIN episodes e ON e.id = j.target_id WHERE j.kind = ? AND e.session_id = ?",
            (jobs.EXTRACT_EPISODE, session_id),
        ).fetchall()
    )


async def test_a_tenant_past_its_budget_waits_for_tomorrow_while_another_flows(h, stub):
    # Tenant a spends its day's budget on one extraction.
    first = await _extracted(h, A, await _session(h, A), "I met Ana in Lisbon.")
    assert first.status == graph_pb2.EXTRACTION_STATUS_DONE
    spent = await h.memory.GetUsage(memory_pb2.GetUsageRequest(), metadata=A)
    assert spent.budget.exhausted and spent.budget.llm_tokens_today > A_BUDGET

    # A thousand of its jobs queued, all due before anything tenant b queues
    # next, and claimed as live work: nothing but the budget stands in front
    # of b's.
    bulk = await _session(h, A)
    ids = await _import(h, A, bulk, QUEUED)
    # Which of a's jobs the extraction worker claims from here on.
    queue = h.app.extraction_worker.queue
    claim, bulk_ids, claimed = queue.claim, set(ids), []

    async def counted(n: int, lease: float) -> list:
        batch = await claim(n, lease)
        claimed.extend(j for j in batch if j.target_id in bulk_ids and j.priority == jobs.LIVE)
        return batch

    # Counted from before the write, and only the claims of jobs it made live:
    # a claim made between its commit and this coroutine's turn is one of the
    # claims the sweep must make unneeded, while an import job claimed before
    # it committed may have swept the backlog to tomorrow only for the write
    # to make it due again (its sooner time wins), so the count starts there.
    queue.claim = counted  # type: ignore[method-assign]
    await h.app.db.write(
        lambda uow: uow.jobs.enqueue(
            jobs.EXTRACT_EPISODE, ids, run_after=time.time() - 60, priority=jobs.LIVE
        )
    )
    asked_before = len(stub.requests_to("/api/chat"))

    # Tenant b's live episode is extracted all the same.
    event = await _extracted(h, B, await _session(h, B), "Bo moved to Oslo.")
    assert event.status == graph_pb2.EXTRACTION_STATUS_DONE

    # Not one of a's was sent to the model; every one waits, none failed, no
    # attempt spent, until the next UTC midnight.
    asked = stub.requests_to("/api/chat")[asked_before:]
    assert [r for r in asked if "tenant a" in r.prompt_text()] == []
    tomorrow = next_day(time.time())

    async def all_held() -> list[tuple] | None:
        rows = await _a_jobs(h, bulk)
        return rows if all(r[2] > tomorrow - 0.5 for r in rows) else None

    rows = await wait_until(all_held, timeout=30)
    assert len(rows) == QUEUED
    assert {(state, attempts) for state, attempts, _ in rows} == {("pending", 0)}
    # (The one claimed is put back with a delay: to within the commit's time.)
    assert all(abs(run_after - tomorrow) < 0.5 for _, _, run_after in rows)
    # The backlog moved in one sweep: the worker claimed no more of a's jobs
    # than its slots held at once (the first it met), not one per job. (It may
    # claim none here: the import's own jobs, due at once, can meet the budget
    # and sweep the backlog before the claims are counted.)
    assert len(claimed) <= h.app.extraction_worker.config.concurrency, len(claimed)
    # The worker never paused for them: it is not waiting on the model.
    assert h.app.extraction_worker.waiting_on is None
    # Each episode says why, where its extraction state is shown.
    episode = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ids[-1]), metadata=A)
    assert episode.extraction_state == memory_pb2.JOB_STATE_PENDING
    assert "extraction waits: tenant 'a' has spent its LLM token budget" in (
        episode.extraction_error
    )
    assert "resumes at" in episode.extraction_error
    noted = await h.app.db.read_sql(
        lambda c: c.execute(
            "SELECT COUNT(*) FROM episodes WHERE session_id = ? AND extract_error LIKE ?",
            (bulk, "%LLM token budget%"),
        ).fetchone()[0]
    )
    assert noted == QUEUED


async def test_past_its_budget_a_tenant_selects_by_similarity_and_is_refused_summaries(h, stub):
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p")), metadata=A
    )
    session = await _session(h, A, project.id)
    await _extracted(h, A, session, "The staging database listens on port 5433.")
    await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_PROJECT,
                project_id=project.id,
                title="staging database port",
                content="The staging database listens on port 5433.",
            )
        ),
        metadata=A,
    )
    asked = len(stub.requests_to("/api/chat"))
    await wait_until(lambda: index_idle(h))

    call = h.memory.SelectMemories(
        memory_pb2.SelectMemoriesRequest(
            prompt="which port does the staging database use?",
            scope=memory_pb2.MemoryScope(project_id=project.id),
        ),
        metadata=A,
    )
    picked = [x async for x in call]
    assert picked and all(x.method == "semantic" for x in picked)
    assert "tenant 'a' has spent its LLM token budget" in picked[0].degraded_reason
    assert "ranked by semantic similarity" in picked[0].degraded_reason
    # The stream says it too, where an answer with no selection can read it.
    trailers = dict(await call.trailing_metadata())
    assert trailers["x-nexus-degraded"] == picked[0].degraded_reason

    for call in (
        h.summary.SummarizeSession(
            summary_pb2.SummarizeSessionRequest(session_id=session), metadata=A
        ),
        _drain(h.summary.SummarizeProject(
            summary_pb2.SummarizeProjectRequest(project_id=project.id), metadata=A
        )),
    ):  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "tenant 'a' has spent its LLM token budget" in refused.value.details()
        status = rpc_status.from_call(refused.value)
        assert status is not None and "llm-tokens-per-day" in str(status.details)
    assert len(stub.requests_to("/api/chat")) == asked  # the model was not asked

    # Searches are unaffected.
    hits = [
        x
        async for x in h.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(query="staging database port", session_id=session),
            metadata=A,
        )
    ]
    assert hits


async def _drain(stream) -> None:
    async for _ in stream:
        pass


async def test_each_key_sees_its_own_tenants_spend_and_an_admin_every_tenants(h, stub):
    """GetServiceStatus's budgets as each key's tenant reaches the domain, and
    doctor printing them; which lines a key is told (another tenant's own
    line, every tenant's for an admin) is tests/unit/test_budgets.py's."""
    await _extracted(h, A, await _session(h, A), "I met Ana in Lisbon.")

    async def budgets(key) -> dict[str, memory_pb2.TenantBudget]:
        status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest(), metadata=key)
        return {b.tenant: b for b in status.budgets}

    mine = await budgets(A)
    assert list(mine) == ["a"]
    assert mine["a"].llm_tokens_per_day == A_BUDGET and mine["a"].exhausted
    assert mine["a"].resets_at.seconds == next_day(time.time())
    assert list(await budgets(B)) == ["b"]
    every = await budgets(ADMIN)
    assert set(every) == {"a", "ops"}  # b has neither a budget of its own nor a spend
    assert every["a"] == mine["a"]
    assert every["ops"].llm_tokens_per_day == 1_000_000 and every["ops"].llm_tokens_today == 0
    # doctor prints them (an admin key: every tenant's).
    out = io.StringIO()
    await doctor(h.target, 5.0, out=out, api_key=ADMIN_KEY)
    printed = out.getvalue()
    assert "LLM tokens today" in printed
    assert f" of {A_BUDGET:,}  SPENT: its LLM work waits for 00:00 UTC" in printed
    assert " of 1,000,000\n" in printed


async def test_a_budget_raised_resumes_the_work_it_held_at_once(tmp_path, stub, store_settings):
    h = await _start(tmp_path, stub, store_settings)
    try:
        session = await _session(h, A)
        await _extracted(h, A, session, "I met Ana in Lisbon.")  # spends the day's budget
        waiting = [
            (
                await h.memory.CreateEpisode(
                    memory_pb2.CreateEpisodeRequest(
                        session_id=session, user_message=f"held {i}", ai_response="ok"
                    ),
                    metadata=A,
                )
            ).id
            for i in range(3)
        ]

        async def all_say_why() -> bool:
            errors = [await _extraction_error(h, e) for e in waiting]
            return all("has spent its LLM token budget" in e for e in errors)

        await wait_until(all_say_why, timeout=20)
    finally:
        await h.close()
    # Started again with the budget raised: the work runs now, not at the
    # next midnight, and the episodes stop saying "100 of 100 tokens".
    h = await _start(tmp_path, stub, store_settings, a_budget=1_000_000)
    try:
        for episode in waiting:
            call = h.graph.WatchExtractions(
                graph_pb2.WatchExtractionsRequest(episode_id=episode), metadata=A
            )
            try:
                [event] = await take(call, 1, 30)
            finally:
                call.cancel()
            assert event.status == graph_pb2.EXTRACTION_STATUS_DONE
            assert await _extraction_error(h, episode) == ""
    finally:
        await h.close()


async def _extraction_error(h: Harness, episode_id: int) -> str:
    episode = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=episode_id), metadata=A)
    return episode.extraction_error
