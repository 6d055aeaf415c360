"""A project's retention: its sessions, episodes and summaries past it are
hidden from every read at once (the semantic and hybrid searches, the exports,
the summaries' reads; keyword search in
tests/unit/test_search_rules_retention_keyword.py, on the fakes), and a
durable job deletes them with their index points (one sweep here, for the
worker's wiring: its job runs, the points leave the vector index, the kept
turn is keyword-searchable). What a sweep deletes and
keeps (summaries included), when it runs next, and a summary written only
from exchanges past the retention hidden before it, are the domain's, tested
on the fakes in tests/unit/test_retention_sweep.py; which retention a project
may be given, and when its sweep is due, in tests/unit/test_conversation_rules.py
and test_retention_followups.py."""

from __future__ import annotations

import time

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.domain import vector_collections
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.store import jobs
from tests.ollama_stub import Reply
from tests.support import wait_until

# Runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

DAY = 86_400
# Keyword search: tests/unit/test_search_rules_retention_keyword.py.
MODES = [
    memory_pb2.SEARCH_MODE_SEMANTIC,
    memory_pb2.SEARCH_MODE_HYBRID,
]


def ts(seconds: float) -> Timestamp:
    t = Timestamp()
    t.FromNanoseconds(int(seconds * 1e9))
    return t


async def code_of(coro) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await coro
    return err.value.code(), err.value.details()


async def count(h, sql: str, *args) -> int:
    return await h.app.db.read_sql(lambda c: c.execute(sql, args).fetchone()[0])


async def indexed(h) -> None:
    async def done():
        return not await count(
            h,
            "SELECT COUNT(*) FROM jobs WHERE kind IN ('index:episodes', 'index:summaries')",
        )

    await wait_until(done, timeout=20)


async def stop_sweeps(h) -> None:
    """Reads must hide what is past retention on their own, before any sweep."""
    for worker in h.app.workers:
        if worker.kind == jobs.RETAIN_PROJECT:
            await worker.stop()


async def world(h):
    """A project with a session of old and recent exchanges, and a session
    created long ago whose every exchange is old."""
    now = time.time()
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    mixed = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    stale = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    eps = {}
    for name, session, when in (
        ("old", mixed.id, now - 3 * DAY),
        ("new", mixed.id, now - 60),
        ("stale", stale.id, now - 5 * DAY),
    ):
        ep = await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session,
                user_message=f"zebra {name} exchange",
                ai_response="noted",
                occur_time=ts(when),
            )
        )
        eps[name] = ep.id
    # The stale session was created long ago (the API always stamps now).
    await h.app.db.write_sql(
        lambda c: c.execute(
            "UPDATE sessions SET created_at = ? WHERE id = ?", (now - 5 * DAY, stale.id)
        )
    )
    return project, mixed, stale, eps


async def set_retention(h, project_id: int, seconds: int | None) -> memory_pb2.Project:
    project = memory_pb2.Project(id=project_id)
    if seconds is not None:
        project.retention.CopyFrom(Duration(seconds=seconds))
    return await h.memory.UpdateProject(
        memory_pb2.UpdateProjectRequest(project=project, update_mask=FieldMask(paths=["retention"]))
    )


async def visible_everywhere(h, project, mixed, stale, eps) -> dict[str, set]:
    """What each read returns of the world's episodes and sessions."""
    got: dict[str, set] = {}
    found = set()
    for name, episode_id in eps.items():
        try:
            await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=episode_id))
            found.add(name)
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND
    got["GetEpisode"] = found
    names = {v: k for k, v in eps.items()}
    listed = set()
    for session in (mixed, stale):
        try:
            page = await h.memory.ListEpisodes(
                memory_pb2.ListEpisodesRequest(session_id=session.id)
            )
            listed |= {names[e.id] for e in page.episodes}
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND
    got["ListEpisodes"] = listed
    for mode in MODES:
        for label, request in (
            ("session", memory_pb2.SearchEpisodesRequest(session_id=mixed.id)),
            ("project", memory_pb2.SearchEpisodesRequest(project_id=project.id)),
            # A window reaching back past the retention does not reach past it.
            ("window", memory_pb2.SearchEpisodesRequest(project_id=project.id, start_time=ts(0))),
        ):
            request.query, request.mode, request.limit = "zebra exchange", mode, 10
            hits = [x async for x in h.memory.SearchEpisodes(request)]
            got[f"Search {memory_pb2.SearchMode.Name(mode)} {label}"] = {
                names[x.episode.id] for x in hits
            }
    sessions = set()
    for label, session in (("mixed", mixed), ("stale", stale)):
        try:
            await h.memory.GetSession(memory_pb2.GetSessionRequest(id=session.id))
            await h.memory.GetSession(memory_pb2.GetSessionRequest(external_id=session.external_id))
            sessions.add(label)
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND
    got["GetSession"] = sessions
    listed_sessions = await h.memory.ListSessions(
        memory_pb2.ListSessionsRequest(project_id=project.id)
    )
    ids = {mixed.id: "mixed", stale.id: "stale"}
    got["ListSessions"] = {ids[x.id] for x in listed_sessions.sessions}
    records = [
        r
        async for r in h.memory.ExportProject(
            memory_pb2.ExportProjectRequest(project_id=project.id)
        )
    ]
    got["Export episodes"] = {names[r.episode.id] for r in records if r.HasField("episode")}
    got["Export sessions"] = {ids[r.session.id] for r in records if r.HasField("session")}
    return got


async def test_past_retention_is_hidden_from_every_read_before_the_sweep(harness):
    h = harness
    await stop_sweeps(h)
    project, mixed, stale, eps = await world(h)
    await indexed(h)
    # The positive case first: without a retention every read sees everything.
    before = await visible_everywhere(h, project, mixed, stale, eps)
    for read, seen in before.items():
        # (A session in a project searches the whole project.)
        expected = {"mixed", "stale"} if "Session" in read or "sessions" in read else set(eps)
        assert seen == expected, read
    updated = await set_retention(h, project.id, 2 * DAY)
    assert updated.retention.seconds == 2 * DAY
    after = await visible_everywhere(h, project, mixed, stale, eps)
    for read, seen in after.items():
        expected = {"mixed"} if "Session" in read or "sessions" in read else {"new"}
        assert seen == expected, read
    # Nothing was deleted yet: the reads alone hide it.
    assert await count(h, "SELECT COUNT(*) FROM episodes") == 3
    # A write into a session past retention finds no session.
    code, details = await code_of(
        h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=stale.id, user_message="hi")
        )
    )
    assert code == grpc.StatusCode.NOT_FOUND and f"session {stale.id}" in details
    # Cleared: everything is kept, and seen, again.
    cleared = await set_retention(h, project.id, None)
    assert not cleared.HasField("retention")
    assert await visible_everywhere(h, project, mixed, stale, eps) == before


async def test_the_sweep_deletes_rows_and_points_past_retention(harness):
    h = harness
    project, mixed, stale, eps = await world(h)
    await indexed(h)
    name = vector_collections.EPISODES.name
    assert await h.app.index.retrieve_ids(name, list(eps.values())) == set(eps.values())
    await set_retention(h, project.id, 2 * DAY)

    async def swept():
        return await count(h, "SELECT COUNT(*) FROM episodes") == 1

    await wait_until(swept, timeout=20)
    assert await count(h, "SELECT COUNT(*) FROM sessions WHERE id = ?", stale.id) == 0
    assert await count(h, "SELECT COUNT(*) FROM episodes WHERE id = ?", eps["new"]) == 1
    await indexed(h)
    assert await h.app.index.retrieve_ids(name, list(eps.values())) == {eps["new"]}
    # The sweep scheduled its next run, no later than an hour away.
    due = await h.app.db.read_sql(
        lambda c: c.execute(
            "SELECT run_after FROM jobs WHERE kind = 'retain:project' AND target_id = ?"
            " AND state = 'pending'",
            (project.id,),
        ).fetchone()
    )
    assert due is not None and due[0] <= time.time() + 3600 + 1
    # The new exchange's turn, once its old neighbour is gone, is keyword-searchable.
    hits = [
        x.episode.id
        async for x in h.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(
                query="zebra", session_id=mixed.id, mode=memory_pb2.SEARCH_MODE_KEYWORD
            )
        )
    ]
    assert hits == [eps["new"]]


async def test_a_bad_retention_is_refused_by_name_and_writes_nothing(harness):
    """The wire's own check of a Duration, and one of the domain's refusals,
    on CreateProject and UpdateProject (the domain's others: the 100-year
    bound, whole seconds, in tests/unit/test_conversation_rules.py)."""
    h = harness
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(
            project=memory_pb2.Project(name="p", retention=Duration(seconds=DAY))
        )
    )
    assert project.retention.seconds == DAY
    for retention, words in (
        (Duration(seconds=5, nanos=-1), "not a valid duration"),
        (Duration(seconds=-5), "positive"),
    ):
        code, details = await code_of(
            h.memory.CreateProject(
                memory_pb2.CreateProjectRequest(
                    project=memory_pb2.Project(name="q", retention=retention)
                )
            )
        )
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert "project.retention" in details and words in details
        code, details = await code_of(
            h.memory.UpdateProject(
                memory_pb2.UpdateProjectRequest(
                    project=memory_pb2.Project(id=project.id, retention=retention),
                    update_mask=FieldMask(paths=["retention"]),
                )
            )
        )
        assert code == grpc.StatusCode.INVALID_ARGUMENT and words in details
    assert await count(h, "SELECT COUNT(*) FROM projects") == 1
    got = await h.memory.GetProject(memory_pb2.GetProjectRequest(id=project.id))
    assert got.retention.seconds == DAY


# Summaries ------------------------------------------------------------------

SESSION_PROMPT = "You summarise a conversation"
OVERVIEW_PROMPT = "You write a project overview"


async def summaries_world(h):
    """``world`` with a summary of the stale session (written now), one of the
    mixed session and an overview, both last written three days ago."""
    project, mixed, stale, eps = await world(h)
    made = {}
    for name, summary in (
        (
            "stale",
            summary_pb2.Summary(
                session_id=stale.id,
                content="stale summary",
                first_episode_id=eps["stale"],
                last_episode_id=eps["stale"],
                episode_count=1,
            ),
        ),
        (
            "old",
            summary_pb2.Summary(
                session_id=mixed.id,
                content="old summary",
                first_episode_id=eps["old"],
                last_episode_id=eps["old"],
                episode_count=1,
            ),
        ),
        ("overview", summary_pb2.Summary(project_id=project.id, content="old overview")),
    ):
        made[name] = await h.summary.CreateSummary(
            summary_pb2.CreateSummaryRequest(summary=summary)
        )
    long_ago = time.time() - 3 * DAY
    for name in ("old", "overview"):
        await h.app.db.write_sql(
            lambda c, i=made[name].id: c.execute(
                "UPDATE summaries SET created_at = ?, updated_at = ? WHERE id = ?",
                (long_ago, long_ago, i),
            )
        )
    return project, mixed, stale, eps, made


async def summaries_seen(h, project, mixed, stale, made) -> dict[str, set]:
    """What each summary read returns of ``made``."""
    names = {x.id: name for name, x in made.items()}
    got: dict[str, set] = {}
    found = set()
    for name, summary in made.items():
        try:
            await h.summary.GetSummary(summary_pb2.GetSummaryRequest(id=summary.id))
            found.add(name)
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND
    got["GetSummary"] = found
    listed = set()
    for session in (mixed, stale):
        try:
            page = await h.summary.ListSummaries(
                summary_pb2.ListSummariesRequest(session_id=session.id)
            )
            listed |= {names.get(x.id, "?") for x in page.summaries}
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND
    got["ListSummaries session"] = listed
    page = await h.summary.ListSummaries(summary_pb2.ListSummariesRequest(project_id=project.id))
    got["ListSummaries project"] = {names.get(x.id, "?") for x in page.summaries}
    answer = await h.summary.GetProjectOverview(
        summary_pb2.GetProjectOverviewRequest(project_id=project.id)
    )
    got["GetProjectOverview"] = (
        {names.get(answer.overview.id, "?")} if answer.HasField("overview") else set()
    )
    records = [
        r
        async for r in h.memory.ExportProject(
            memory_pb2.ExportProjectRequest(project_id=project.id)
        )
    ]
    got["Export"] = {names.get(r.summary.id, "?") for r in records if r.HasField("summary")}
    return got


async def test_summaries_past_retention_are_hidden_before_the_sweep(llm_harness, stub):
    h = llm_harness
    await stop_sweeps(h)
    project, mixed, stale, eps, made = await summaries_world(h)
    before = await summaries_seen(h, project, mixed, stale, made)
    assert before == {
        "GetSummary": {"stale", "old", "overview"},
        "ListSummaries session": {"stale", "old"},
        "ListSummaries project": {"stale", "old", "overview"},
        "GetProjectOverview": {"overview"},
        "Export": {"stale", "old", "overview"},
    }
    await set_retention(h, project.id, 2 * DAY)
    # The stale session's summary goes with its session, however recently it
    # was written; the others were written from what is past the retention.
    after = await summaries_seen(h, project, mixed, stale, made)
    assert after == {read: set() for read in before}
    for call in (
        h.summary.UpdateSummary(
            summary_pb2.UpdateSummaryRequest(
                summary=summary_pb2.Summary(id=made["stale"].id, content="x"),
                update_mask=FieldMask(paths=["content"]),
            )
        ),
        h.summary.DeleteSummary(summary_pb2.DeleteSummaryRequest(id=made["old"].id)),
        h.summary.SummarizeSession(summary_pb2.SummarizeSessionRequest(session_id=stale.id)),
    ):
        code, _ = await code_of(call)
        assert code == grpc.StatusCode.NOT_FOUND
    for summary, field in (
        (summary_pb2.Summary(session_id=stale.id, content="x"), "summary.session_id"),
        (
            summary_pb2.Summary(session_id=mixed.id, content="x", first_episode_id=eps["old"]),
            "summary.first_episode_id",
        ),
    ):
        code, details = await code_of(
            h.summary.CreateSummary(summary_pb2.CreateSummaryRequest(summary=summary))
        )
        assert code == grpc.StatusCode.FAILED_PRECONDITION and field in details
    assert await count(h, "SELECT COUNT(*) FROM summaries") == 3

    # A new summary of the mixed session reads only what is kept: the old
    # summary is not built upon, the old exchange not summarized.
    stub.add_rule(Reply.of("Recent talk."), contains=SESSION_PROMPT, times=1)
    fresh = await h.summary.SummarizeSession(
        summary_pb2.SummarizeSessionRequest(session_id=mixed.id)
    )
    assert (fresh.first_episode_id, fresh.last_episode_id, fresh.episode_count) == (
        eps["new"],
        eps["new"],
        1,
    )
    text = [r for r in stub.requests if SESSION_PROMPT in r.prompt_text()][-1].prompt_text()
    assert "zebra new" in text and "zebra old" not in text and "old summary" not in text
    # The overview is written from the kept summaries only.
    stub.add_rule(Reply.of("Overview of recent talk."), contains=OVERVIEW_PROMPT, times=1)
    request = summary_pb2.SummarizeProjectRequest(project_id=project.id)
    parts = [x async for x in h.summary.SummarizeProject(request)]
    assert parts[-1].summary.content == "Overview of recent talk."
    text = [r for r in stub.requests if OVERVIEW_PROMPT in r.prompt_text()][-1].prompt_text()
    assert "Recent talk." in text
    assert "stale summary" not in text and "old summary" not in text and "old overview" not in text
    overview = await h.summary.GetProjectOverview(
        summary_pb2.GetProjectOverviewRequest(project_id=project.id)
    )
    assert overview.overview.content == "Overview of recent talk."

    # Cleared: the summaries nobody deleted are seen again.
    await set_retention(h, project.id, None)
    cleared = await summaries_seen(h, project, mixed, stale, made)
    assert cleared["GetSummary"] == {"stale", "old", "overview"}
    assert cleared["ListSummaries session"] == {"stale", "old", "?"}


async def test_an_overview_reads_no_exchange_past_retention(llm_harness, stub):
    h = llm_harness
    await stop_sweeps(h)
    project, _, _, _ = await world(h)
    await set_retention(h, project.id, 2 * DAY)
    stub.add_rule(Reply.of("Only the new one."), contains=OVERVIEW_PROMPT, times=1)
    request = summary_pb2.SummarizeProjectRequest(project_id=project.id)
    parts = [x async for x in h.summary.SummarizeProject(request)]
    assert parts[-1].summary.content == "Only the new one."
    text = [r for r in stub.requests if OVERVIEW_PROMPT in r.prompt_text()][-1].prompt_text()
    assert "zebra new" in text and "zebra old" not in text and "zebra stale" not in text
