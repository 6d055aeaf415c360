"""SummaryService through the Ollama stand-in, each RPC path's wiring: CRUD and
listing, the automatic trigger run by the worker, SummarizeSession's status
codes, SummarizeProject's stream (text deltas, then the stored row), and a
cut answer refused over HTTP on both.

What the domain decides without a model (which summaries may be written,
listing, overviews absent or unknown, the refusals without a model, the index
jobs each write queues) is tested on the fakes in
tests/unit/test_summary_rules.py; what it decides once a model is asked
(cumulative updates and rollover, passes that fit the context, an exchange or
an overview's input folded, the overview's fallback to recent exchanges and
its truncation, a cut answer never stored, the episode range a summary may
name) in tests/unit/test_summary_passes.py, with a scripted in-process model.
"""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from tests.ollama_stub import Reply
from tests.support import wait_until

# Every test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

SESSION_PROMPT = "You summarise a conversation"
OVERVIEW_PROMPT = "You write a project overview"


def prompts(stub, marker):
    return [r for r in stub.requests if marker in r.prompt_text()]


async def code_of(coro) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await coro
    return err.value.code()


async def project_session(h, name="proj"):
    p = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name=name))
    )
    ses = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=p.id))
    )
    return p.id, ses.id


async def episode(h, session_id, user="hi", ai="hello"):
    return await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session_id, user_message=user, ai_response=ai)
    )


async def summaries_of(h, session_id):
    page = await h.summary.ListSummaries(summary_pb2.ListSummariesRequest(session_id=session_id))
    return list(page.summaries)


# CRUD ----------------------------------------------------------------------


async def test_crud_and_listing(harness):
    h = harness
    pid, sid = await project_session(h)
    eps = [await episode(h, sid) for _ in range(3)]
    a = await h.summary.CreateSummary(
        summary_pb2.CreateSummaryRequest(
            summary=summary_pb2.Summary(
                session_id=sid,
                content="first",
                first_episode_id=eps[0].id,
                last_episode_id=eps[2].id,
                episode_count=3,
            )
        )
    )
    assert (a.session_id, a.project_id, a.episode_count) == (sid, pid, 3)
    b = await h.summary.CreateSummary(
        summary_pb2.CreateSummaryRequest(
            summary=summary_pb2.Summary(project_id=pid, content="overview")
        )
    )
    got = await h.summary.GetSummary(summary_pb2.GetSummaryRequest(id=a.id))
    assert got.content == "first"
    upd = await h.summary.UpdateSummary(
        summary_pb2.UpdateSummaryRequest(
            summary=summary_pb2.Summary(id=a.id, content="changed"),
            update_mask=FieldMask(paths=["content"]),
        )
    )
    assert upd.content == "changed"
    by_session = await h.summary.ListSummaries(summary_pb2.ListSummariesRequest(session_id=sid))
    assert [x.id for x in by_session.summaries] == [a.id]
    by_project = await h.summary.ListSummaries(
        summary_pb2.ListSummariesRequest(project_id=pid, page_size=1)
    )
    assert [x.id for x in by_project.summaries] == [a.id] and by_project.next_page_token
    nxt = await h.summary.ListSummaries(
        summary_pb2.ListSummariesRequest(
            project_id=pid, page_size=1, page_token=by_project.next_page_token
        )
    )
    assert [x.id for x in nxt.summaries] == [b.id]
    ov = await h.summary.GetProjectOverview(summary_pb2.GetProjectOverviewRequest(project_id=pid))
    assert ov.overview.id == b.id
    await h.summary.DeleteSummary(summary_pb2.DeleteSummaryRequest(id=a.id))
    assert await code_of(h.summary.GetSummary(summary_pb2.GetSummaryRequest(id=a.id))) == (
        grpc.StatusCode.NOT_FOUND
    )
    # A refusal of the domain's comes back by its code and names what is wrong.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await h.summary.ListSummaries(summary_pb2.ListSummariesRequest())
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "session_id or project_id is required" in err.value.details()
    missing = h.summary.GetProjectOverview(summary_pb2.GetProjectOverviewRequest(project_id=999))
    assert await code_of(missing) == grpc.StatusCode.NOT_FOUND


# Session summaries ----------------------------------------------------------


async def test_trigger_thresholds_queue_and_run_the_job(llm_harness, stub):
    h = llm_harness
    stub.add_rule(Reply.of("They discussed <|im_end|>gardening."), contains=SESSION_PROMPT)
    _, short = await project_session(h, "short")
    for _ in range(6):  # 6 episodes but far under ~200 tokens
        await episode(h, short)
    _, sid = await project_session(h, "long")
    long_text = "tomatoes " * 30
    eps = [await episode(h, sid, long_text, long_text) for _ in range(4)]
    jobs = await h.app.db.read_sql(
        lambda c: c.execute(
            "SELECT COUNT(*) FROM jobs WHERE kind = 'summarize:session'"
        ).fetchone()[0]
    )
    assert jobs == 0  # enough text, but only 4 episodes
    eps.append(await episode(h, sid, long_text, long_text))  # the 5th: the job is queued

    async def summarized():
        return await summaries_of(h, sid)

    [summary] = await wait_until(summarized)
    assert summary.content == "They discussed gardening."  # ChatML stripped
    assert (summary.first_episode_id, summary.last_episode_id, summary.episode_count) == (
        eps[0].id,
        eps[-1].id,
        5,
    )
    req = prompts(stub, SESSION_PROMPT)[0]
    assert req["options"]["temperature"] == 0.2 and req["options"]["num_predict"] == 500
    assert await summaries_of(h, short) == []


async def test_summarize_session_errors(llm_harness, stub):
    h = llm_harness
    _, sid = await project_session(h)
    assert (
        await code_of(
            h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=sid))
        )
        == grpc.StatusCode.FAILED_PRECONDITION
    )
    assert (
        await code_of(
            h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=999))
        )
        == grpc.StatusCode.NOT_FOUND
    )
    await episode(h, sid)
    stub.add_rule(Reply.error_status(500, "runner died"), contains=SESSION_PROMPT)
    assert (
        await code_of(
            h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=sid))
        )
        == grpc.StatusCode.UNAVAILABLE
    )
    assert await summaries_of(h, sid) == []


# Project overviews ----------------------------------------------------------


async def _overview(h, pid):
    return [
        x
        async for x in h.summary.SummarizeProject(
            summary_pb2.SummarizeProjectRequest(project_id=pid)
        )
    ]


async def test_overview_streams_text_then_the_stored_row(llm_harness, stub):
    h = llm_harness
    pid, sid = await project_session(h, "Garden")
    eps = [await episode(h, sid, f"rose {i}") for i in range(4)]
    await h.summary.CreateSummary(
        summary_pb2.CreateSummaryRequest(
            summary=summary_pb2.Summary(
                session_id=sid,
                content="Session about roses.",
                first_episode_id=eps[0].id,
                last_episode_id=eps[3].id,
                episode_count=4,
            )
        )
    )
    stub.add_rule(
        Reply(chunks=("<think>plan", " it</think>", "Roses ", "and ", "<|im_end|>", "soil.")),
        contains=OVERVIEW_PROMPT,
        times=1,
    )
    parts = await _overview(h, pid)
    deltas = [p.text_delta for p in parts if p.WhichOneof("part") == "text_delta"]
    assert len(deltas) >= 2 and "".join(deltas) == "Roses and soil."
    last = parts[-1]
    assert last.WhichOneof("part") == "summary"
    assert last.summary.content == "Roses and soil." and last.summary.session_id == 0
    assert last.summary.project_id == pid and last.summary.episode_count == 4
    assert last.passes == 1  # it fitted whole
    req = prompts(stub, OVERVIEW_PROMPT)[0]
    assert req["options"]["temperature"] == 0.2 and req["options"]["num_predict"] == 1200
    assert "Session summaries" in req.prompt_text() and "Session about roses." in req.prompt_text()
    ov = await h.summary.GetProjectOverview(summary_pb2.GetProjectOverviewRequest(project_id=pid))
    assert ov.overview.id == last.summary.id
    # A second run updates the same overview row.
    stub.add_rule(Reply.of("Updated."), contains=OVERVIEW_PROMPT)
    again = (await _overview(h, pid))[-1]
    assert again.summary.id == last.summary.id and again.summary.content == "Updated."


async def test_a_cut_summary_or_overview_is_never_stored(llm_harness, stub):
    h = llm_harness
    pid, sid = await project_session(h, "Garden")
    await episode(h, sid, "I set up Grafana dashboards and Prometheus alerts.")
    stub.default = Reply.of("The user set up Grafana dashboards and " + "more " * 2000)
    err = await code_of(
        h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=sid))
    )
    assert err == grpc.StatusCode.UNAVAILABLE
    assert await summaries_of(h, sid) == []
    # Retried once with twice the room, then refused: not stored mid-sentence.
    assert [r["options"]["num_predict"] for r in prompts(stub, SESSION_PROMPT)] == [500, 1000]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await _overview(h, pid)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "cut off and not stored" in info.value.details()
    ov = await h.summary.GetProjectOverview(summary_pb2.GetProjectOverviewRequest(project_id=pid))
    assert not ov.HasField("overview")
    # The positive case: an answer that ends on its own is stored.
    stub.default = Reply.of("The user set up Grafana dashboards.")
    done = await h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=sid))
    assert done.content == "The user set up Grafana dashboards."
