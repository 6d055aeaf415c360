"""SummaryService through the Ollama stand-in: CRUD, the automatic trigger,
cumulative updates and rollover, project overviews (fallback, truncation,
streaming, token stripping) and the model's failures.

What the domain decides without a model (which summaries may be written,
listing, overviews absent or unknown, the refusals without a model, the index
jobs each write queues) is tested on the fakes in
tests/unit/test_summary_rules.py; each RPC keeps its wiring here."""

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


async def test_cumulative_update_then_rollover(llm_harness, stub):
    h = llm_harness
    _, sid = await project_session(h)
    e1 = await episode(h, sid, "apples?", "red")
    await episode(h, sid, "pears?", "green")
    stub.add_rule(Reply.of("<think>hmm</think>Fruit talk."), contains=SESSION_PROMPT, times=1)
    first = await h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=sid))
    assert (first.content, first.first_episode_id, first.episode_count) == ("Fruit talk.", e1.id, 2)
    # Nothing new: the latest summary comes back unchanged, no model call.
    calls = len(prompts(stub, SESSION_PROMPT))
    again = await h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=sid))
    assert again.id == first.id and len(prompts(stub, SESSION_PROMPT)) == calls

    e3 = await episode(h, sid, "plums?", "purple")
    stub.add_rule(Reply.of("Fruit talk, plums too."), contains=SESSION_PROMPT, times=1)
    second = await h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=sid))
    assert second.id == first.id  # updated in place
    assert (second.content, second.last_episode_id, second.episode_count) == (
        "Fruit talk, plums too.",
        e3.id,
        3,
    )
    text = prompts(stub, SESSION_PROMPT)[-1].prompt_text()
    assert "Fruit talk." in text and "plums?" in text and "apples?" not in text

    h.app.summaries.size_cap = 10  # the latest is now over its cap
    e4 = await episode(h, sid, "kiwis?", "brown")
    stub.add_rule(Reply.of("Kiwis."), contains=SESSION_PROMPT, times=1)
    third = await h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=sid))
    assert third.id != first.id
    assert (third.first_episode_id, third.last_episode_id, third.episode_count) == (e4.id, e4.id, 1)
    assert "Fruit talk" not in prompts(stub, SESSION_PROMPT)[-1].prompt_text()
    assert [x.id for x in await summaries_of(h, sid)] == [first.id, third.id]


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


async def test_overview_falls_back_to_recent_episodes_truncated(llm_harness, stub):
    h = llm_harness
    pid, sid = await project_session(h, "Big")
    h.app.summaries.overview_episode_limit = 30
    stub.add_rule(Reply.of("Overview."), contains=OVERVIEW_PROMPT)
    # Keep the automatic session summary out of the way: it would change the source.
    stub.add_rule(Reply.error_status(500), contains=SESSION_PROMPT)
    eps = [await episode(h, sid, f"question {i:03d} " + "x" * 300, "answer") for i in range(40)]
    parts = await _overview(h, pid)
    assert parts[-1].summary.content == "Overview."
    text = prompts(stub, OVERVIEW_PROMPT)[0].prompt_text()
    assert "Conversation excerpts" in text
    assert "question 039" in text  # the most recent is kept
    assert "question 009" not in text  # beyond the episode limit
    assert "question 010" not in text  # cut by the 8,000-character truncation
    material = text.split("most recent last):\n", 1)[1].rsplit("\n\nWrite the overview", 1)[0]
    assert len(material) <= 8000
    assert parts[-1].summary.last_episode_id == eps[-1].id
    assert parts[-1].summary.first_episode_id == eps[10].id


async def test_a_long_session_is_summarized_in_passes_that_fit_the_prompt(llm_harness, stub):
    h = llm_harness
    stub.default = Reply.of("a summary so far")
    # An 8,192-token model: room for one 5,000-character episode per pass, not two.
    stub.context_lengths = {"qwen2.5:3b": 8192}
    _, sid = await project_session(h)
    eps = [await episode(h, sid, user="x" * 5000, ai="ok") for _ in range(3)]
    first = await h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=sid))
    assert (first.first_episode_id, first.last_episode_id) == (eps[0].id, eps[0].id)
    sent = prompts(stub, SESSION_PROMPT)
    assert sent and all(not r.truncated and r["options"]["num_ctx"] == 8192 for r in sent)

    async def covered():
        rows = await summaries_of(h, sid)
        return rows and max(r.last_episode_id for r in rows) == eps[-1].id

    # The rest was queued as further passes, and the worker runs them.
    await wait_until(covered)


async def test_an_episode_longer_than_the_context_is_folded_not_cut(llm_harness, stub):
    h = llm_harness
    stub.context_lengths = {"qwen2.5:3b": 4096}
    # Only the summary's first part (extraction reads the same text).
    stub.add_rule(
        Reply.of("Part one: the user likes roses."),
        contains="Conversation:\nUser: FIRST-FACT",
        times=1,
    )
    stub.default = Reply.of("The user likes roses and tulips.")
    _, sid = await project_session(h)
    ep = await episode(h, sid, user="FIRST-FACT " + "roses " * 1200 + "LAST-FACT tulips", ai="ok")
    summary = await h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=sid))
    assert summary.content == "The user likes roses and tulips."
    assert (summary.first_episode_id, summary.last_episode_id) == (ep.id, ep.id)
    sent = prompts(stub, SESSION_PROMPT)
    assert len(sent) >= 2  # folded in several calls...
    assert all(not r.truncated for r in sent)  # ...none of them cut by the server
    assert "FIRST-FACT" in sent[0].prompt_text() and "LAST-FACT" in sent[-1].prompt_text()
    # Each later part is folded into the summary so far.
    assert "Part one: the user likes roses." in sent[1].prompt_text()


async def test_a_summary_range_names_episodes_of_its_own_scope(harness):
    """Found by tests/e2e/api/test_fuzz_rpcs.py: a range naming an episode that never
    existed was stored, and the summarizer, which resumes after the latest
    summary's last_episode_id, would then skip every episode up to it."""
    h = harness
    pid, sid = await project_session(h)
    _, other_sid = await project_session(h, "other")
    mine, theirs = await episode(h, sid), await episode(h, other_sid)
    precondition = grpc.StatusCode.FAILED_PRECONDITION
    for scope, first, last in (
        ({"session_id": sid}, 0, theirs.id + 100),  # never existed
        ({"session_id": sid}, mine.id, theirs.id),  # another session's
        ({"session_id": sid}, theirs.id, 0),
        ({"project_id": pid}, 0, theirs.id),  # another project's
    ):
        bad = h.summary.CreateSummary(summary_pb2.CreateSummaryRequest(summary=summary_pb2.Summary(
            content="c", first_episode_id=first, last_episode_id=last, **scope)))  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await bad
        assert err.value.code() == precondition, (scope, first, last)
        assert "episode" in err.value.details()
    assert await summaries_of(h, sid) == []
    ok = await h.summary.CreateSummary(
        summary_pb2.CreateSummaryRequest(
            summary=summary_pb2.Summary(
                project_id=pid, content="c", first_episode_id=mine.id, last_episode_id=mine.id
            )
        )
    )
    assert (ok.project_id, ok.last_episode_id) == (pid, mine.id)


FOLD_PROMPT = "You condense part of a project's history"


async def test_an_overview_past_the_context_is_folded_and_says_how_often(llm_harness, stub):
    h = llm_harness
    # A 4,096-token model: the 8,000 characters of summaries do not fit with
    # 1,200 answer tokens; whole, as a real server would cut them, not at all.
    stub.context_lengths = {"qwen2.5:3b": 4096}
    pid, sid = await project_session(h, "Garden")
    for i in range(4):
        e = await episode(h, sid, f"rose {i}")
        await h.summary.CreateSummary(
            summary_pb2.CreateSummaryRequest(
                summary=summary_pb2.Summary(
                    session_id=sid,
                    content=f"SESSION-{i} " + "roses " * 300,
                    first_episode_id=e.id,
                    last_episode_id=e.id,
                    episode_count=1,
                )
            )
        )
    stub.add_rule(Reply.of("Condensed: roses."), contains=FOLD_PROMPT)
    stub.add_rule(Reply(content="An overview of roses."), contains=OVERVIEW_PROMPT)
    parts = await _overview(h, pid)
    folds, final = prompts(stub, FOLD_PROMPT), prompts(stub, OVERVIEW_PROMPT)
    assert len(folds) >= 2 and len(final) == 1
    assert parts[-1].summary.content == "An overview of roses."
    assert parts[-1].passes == len(folds) + 1
    assert all(not r.truncated for r in folds + final)
    # Oldest first, every session's summary in some part, none cut mid-way.
    folded = "".join(r.prompt_text() for r in folds)
    assert all(f"SESSION-{i}" in folded for i in range(1, 4))
    assert final[0].prompt_text().count("Condensed: roses.") == len(folds)


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
