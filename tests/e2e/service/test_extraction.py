"""Durable entity extraction through the real server and the Ollama stand-in:
the wiring of the extract worker and ExtractEpisode (the request on the wire,
retries, dead letters, waiting for an absent model, requeues), the model
client's own behaviour as extraction meets it (a server that does not say its
context, an answer cut off twice), and one graph per project or session as
every read RPC shows it.

What extraction writes for a given model answer (the prompt's known entities,
the types, names and labels kept, mention counts and notes, an episode in
parts, which failures wait) is decided by domain/extraction.py and tested on
the fakes: tests/unit/test_extraction_rules.py; what a retry, a dead letter
and ExtractEpisode's requeues write, and the requests the domain refuses:
tests/unit/test_extraction_requeue.py; how names resolve:
tests/unit/test_resolution_use_case.py."""

from __future__ import annotations

import grpc

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.graph_support import (
    ALICE,
    EMPTY,
    event_for,
    expect_status,
    new_episode,
    new_project,
    new_session,
    speed_up,
    start_graph_harness,
)
from tests.ollama_stub import Reply
from tests.support import Harness, take, wait_until

# Every harness test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True


async def job_rows(h: Harness, kind: str = "extract:episode") -> list[tuple]:
    return await h.app.db.read_sql(
        lambda c: [
            tuple(r)
            for r in c.execute(
                "SELECT target_id, state, attempts, last_error FROM jobs WHERE kind = ?", (kind,)
            )
        ]
    )


# Fixtures -------------------------------------------------------------------


# The conftest's ``stub`` answers chats no test scripted with this.
STUB_DEFAULT_REPLY = EMPTY


# The LLM call -----------------------------------------------------------------


async def test_the_extraction_request_reaches_the_model_as_configured(gh, stub):
    """The extract worker's call on the wire: the configured model, its
    options and schema, the episode in the prompt. Which known entities the
    prompt lists is tests/unit/test_extraction_rules.py's."""
    p = await new_project(gh)
    await gh.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="Thing21", type="concept", project_id=p.id)
    )
    s = await new_session(gh, p.id)
    ep = await new_episode(gh, s.id, "Where does Alice work?", "Alice works at Initech.")
    event = await event_for(gh, ep.id)
    assert event.status == graph_pb2.EXTRACTION_STATUS_DONE

    [req] = stub.requests_to("/api/chat")
    assert req["model"] == "qwen2.5:3b"
    assert req["stream"] is False
    assert req["options"]["temperature"] == 0.1
    assert req["options"]["num_predict"] == 1500
    schema = req["format"]
    assert isinstance(schema, dict) and set(schema["required"]) == {"entities", "relationships"}
    prompt = req.prompt_text()
    assert "Where does Alice work?" in prompt and "Alice works at Initech." in prompt
    assert "Thing21 (concept)" in prompt


# One graph per project ----------------------------------------------------------


async def test_each_project_has_its_own_graph(gh, stub):
    """The same name and type extracted in two projects are two entities, and
    no read, walk, search or event of one project shows the other's."""

    def about(where: str) -> dict:
        return {
            "entities": [
                {"name": "Alice", "type": "person", "notes": f"Works on {where}"},
                {"name": "Atlas", "type": "project", "notes": f"The {where} atlas"},
            ],
            "relationships": [{"from": "Alice", "to": "Atlas", "label": "leads", "notes": None}],
        }

    stub.add_rule(Reply.of(about("Orion")), contains="orion-episode")
    stub.add_rule(Reply.of(about("Vega")), contains="vega-episode")
    p1, p2 = await new_project(gh, "one"), await new_project(gh, "two")
    s1, s2 = await new_session(gh, p1.id), await new_session(gh, p2.id)
    ev1 = await event_for(gh, (await new_episode(gh, s1.id, "orion-episode")).id)
    ev2 = await event_for(gh, (await new_episode(gh, s2.id, "vega-episode")).id)
    scopes = [(p1, ev1, "Orion"), (p2, ev2, "Vega")]
    ids1 = {e.name: e.id for e in ev1.entities}
    ids2 = {e.name: e.id for e in ev2.entities}
    assert set(ids1) == set(ids2) == {"Alice", "Atlas"}
    assert not set(ids1.values()) & set(ids2.values())  # two entities per name/type

    index = gh.app.index
    everyone = [*ids1.values(), *ids2.values()]

    async def indexed() -> bool:
        return await index.retrieve_ids("entities", everyone) == set(everyone)

    await wait_until(indexed)
    for p, event, where in scopes:
        own = {e.id for e in event.entities}
        # The event payload: this project's entities, notes and edge only.
        assert event.project_id == p.id
        assert all(e.project_id == p.id and where in e.notes for e in event.entities)
        assert all(e.mention_count == 1 for e in event.entities)
        [rel] = event.relationships
        assert {rel.from_id, rel.to_id} == own
        # Replayed through a project watch, too.
        call = gh.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(project_id=p.id))
        [replayed] = await take(call, 1)
        call.cancel()
        assert replayed.episode_id == event.episode_id and replayed.entities == event.entities

        listed = await gh.graph.ListEntities(graph_pb2.ListEntitiesRequest(project_id=p.id))
        assert {e.id for e in listed.entities} == own
        assert all(e.project_id == p.id and where in e.notes for e in listed.entities)

        alice = next(e for e in event.entities if e.name == "Alice")
        hood = await gh.graph.GetNeighborhood(
            graph_pb2.GetNeighborhoodRequest(entity_id=alice.id, depth=3)
        )
        assert {n.id for n in hood.nodes} == own and [e.id for e in hood.edges] == [rel.id]
        assert all(where in n.notes for n in hood.nodes)
        near = await gh.graph.GetNeighbors(graph_pb2.GetNeighborsRequest(entity_ids=[alice.id]))
        assert {n.id for n in near.nodes} == own and [e.id for e in near.edges] == [rel.id]
        rels = await gh.graph.ListRelationships(
            graph_pb2.ListRelationshipsRequest(entity_id=alice.id, include_inbound=True)
        )
        assert [r.id for r in rels.relationships] == [rel.id]

        call = gh.graph.SearchEntities(
            graph_pb2.SearchEntitiesRequest(query="Alice works on Atlas", project_id=p.id, limit=10)
        )
        hits = [h async for h in call]
        assert alice.id in {h.entity.id for h in hits}
        assert {h.entity.id for h in hits} <= own
        assert all(h.entity.project_id == p.id and where in h.entity.notes for h in hits)

    # An edge between two projects' entities is refused, and nothing is written.
    details = await expect_status(
        gh.graph.UpsertRelationship(
            graph_pb2.UpsertRelationshipRequest(
                from_id=ids1["Alice"], to_id=ids2["Atlas"], label="knows"
            )
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "project",
    )
    assert str(p1.id) in details and str(p2.id) in details
    for ids in (ids1, ids2):
        rels = await gh.graph.ListRelationships(
            graph_pb2.ListRelationshipsRequest(entity_id=ids["Alice"], include_inbound=True)
        )
        assert len(rels.relationships) == 1

    # A manual upsert is keyed by its project too.
    again = await gh.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="Alice", type="person", project_id=p2.id)
    )
    assert again.id == ids2["Alice"] and again.mention_count == 2
    loose = await gh.graph.UpsertEntity(graph_pb2.UpsertEntityRequest(name="Alice", type="person"))
    assert loose.id not in everyone and loose.project_id == 0
    await expect_status(
        gh.graph.UpsertRelationship(
            graph_pb2.UpsertRelationshipRequest(
                from_id=loose.id, to_id=ids1["Atlas"], label="knows"
            )
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "project",
    )


# Extracting again and the model's context -----------------------------------------


async def test_reextraction_is_idempotent(gh, stub):
    """ExtractEpisode of one episode: queued, run again, its event replayed
    after the first (that nothing counts twice is
    tests/unit/test_extraction_rules.py's, on the fakes)."""
    stub.default = Reply.of(ALICE)
    s = await new_session(gh)
    ep = await new_episode(gh, s.id)
    first = await event_for(gh, ep.id)
    resp = await gh.graph.ExtractEpisode(graph_pb2.ExtractEpisodeRequest(episode_id=ep.id))
    assert resp.queued == 1
    call = gh.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(episode_id=ep.id, after_event_id=first.event_id)
    )
    [again] = await take(call, 1)
    call.cancel()
    assert again.event_id > first.event_id
    assert sorted(e.mention_count for e in again.entities) == [1, 1]
    assert [r.mention_count for r in again.relationships] == [1]
    assert len(stub.requests_to("/api/chat")) == 2


async def test_a_server_whose_show_has_no_model_info_is_given_4096_tokens(gh, stub, caplog):
    """Ollama before 0.3 and some Ollama-compatible servers answer /api/show
    without model_info. docs/llm.md promises 4,096 tokens then; before, the
    ollama package's validation error failed every extraction."""
    stub.show_model_info = False
    stub.default = Reply.of(ALICE)
    s = await new_session(gh)
    ep = await new_episode(gh, s.id)
    event = await event_for(gh, ep.id)
    assert event.status == graph_pb2.EXTRACTION_STATUS_DONE and len(event.entities) == 2
    [chat] = stub.requests_to("/api/chat")
    assert chat["options"]["num_ctx"] <= 4096
    assert stub.requests_to("/api/show"), "the server was asked"
    assert any("assuming 4096 tokens" in r.getMessage() for r in caplog.records)


# Failures ---------------------------------------------------------------------


async def test_malformed_answer_then_success_on_retry(gh, stub):
    stub.enqueue(Reply.of("Sure! Here are the entities: Alice"), Reply.garbage(), Reply.of(ALICE))
    s = await new_session(gh)
    ep = await new_episode(gh, s.id)
    event = await event_for(gh, ep.id)
    assert event.status == graph_pb2.EXTRACTION_STATUS_DONE and len(event.entities) == 2
    assert len(stub.requests_to("/api/chat")) == 3
    episode = await gh.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ep.id))
    assert episode.extraction_state == memory_pb2.JOB_STATE_DONE and episode.extraction_error == ""
    assert await job_rows(gh) == []


async def test_server_error_is_retried_and_its_error_is_visible(tmp_path, stub):
    # Slow backoff here, so the pending state with its error can be observed.
    h = await start_graph_harness(tmp_path / "data", stub)
    speed_up(h, backoff_base=0.5, backoff_max=0.5)
    try:
        stub.enqueue(Reply.error_status(500, "runner crashed"), Reply.of(ALICE))
        s = await new_session(h)
        ep = await new_episode(h, s.id)

        async def shows_error():
            e = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ep.id))
            return e.extraction_state == memory_pb2.JOB_STATE_PENDING and "runner crashed" in (
                e.extraction_error
            )

        await wait_until(shows_error)
        event = await event_for(h, ep.id)
        assert event.status == graph_pb2.EXTRACTION_STATUS_DONE
    finally:
        await h.close()


async def test_failure_after_max_attempts_then_requeue_all_failed(gh, stub):
    stub.default = Reply.of("I cannot do that")
    s = await new_session(gh)
    ep = await new_episode(gh, s.id)
    event = await event_for(gh, ep.id)
    assert event.status == graph_pb2.EXTRACTION_STATUS_FAILED
    assert "did not answer JSON" in event.error
    assert len(stub.requests_to("/api/chat")) == 3  # job_max_attempts
    episode = await gh.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ep.id))
    assert episode.extraction_state == memory_pb2.JOB_STATE_FAILED
    assert "did not answer JSON" in episode.extraction_error
    [(target, state, attempts, _)] = await job_rows(gh)
    assert (target, state, attempts) == (ep.id, "failed", 3)

    stub.default = Reply.of(ALICE)
    resp = await gh.graph.ExtractEpisode(graph_pb2.ExtractEpisodeRequest(all_failed=True))
    assert resp.queued == 1
    call = gh.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(episode_id=ep.id, after_event_id=event.event_id)
    )
    [done] = await take(call, 1)
    call.cancel()
    assert done.status == graph_pb2.EXTRACTION_STATUS_DONE
    episode = await gh.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ep.id))
    assert episode.extraction_state == memory_pb2.JOB_STATE_DONE and episode.extraction_error == ""


async def test_ollama_down_then_backlog_drains(gh, stub):
    stub.default = Reply.of(ALICE)
    stub.stop()
    s = await new_session(gh)
    episodes = [await new_episode(gh, s.id, f"message {i}") for i in range(3)]

    async def all_postponed():
        rows = await job_rows(gh)
        return len(rows) == 3 and all(
            r[1] == "pending" and r[2] == 0 and "cannot reach Ollama" in r[3] for r in rows
        )

    await wait_until(all_postponed)  # waiting, without spending attempts
    call = gh.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(session_id=s.id))
    stub.start()  # same port
    events = await take(call, 3)
    call.cancel()
    assert sorted(e.episode_id for e in events) == [e.id for e in episodes]
    assert all(e.status == graph_pb2.EXTRACTION_STATUS_DONE for e in events)


async def test_without_ollama_jobs_wait_and_status_says_so(harness):
    s = await new_session(harness)
    ep = await new_episode(harness, s.id)
    status = await harness.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
    ollama = next(d for d in status.dependencies if d.name == "ollama")
    # Off, not failing: the server is whole without one, and says what waits.
    assert ollama.ok and ollama.off and "wait in their queues" in ollama.detail
    assert "(1 job waiting now)" in ollama.detail
    assert status.state == "SERVING"
    assert harness.app.llm_ready() is not None
    rows = await job_rows(harness)
    assert [(r[0], r[1], r[2]) for r in rows] == [(ep.id, "pending", 0)]


# ExtractEpisode errors ----------------------------------------------------------


async def test_extract_episode_errors(gh):
    """The RPC's own request checks, and one refusal of the domain's as a
    status (the domain's others: tests/unit/test_extraction_requeue.py)."""
    await expect_status(
        gh.graph.ExtractEpisode(graph_pb2.ExtractEpisodeRequest()),
        grpc.StatusCode.INVALID_ARGUMENT,
        "episode_id or all_failed",
    )
    await expect_status(
        gh.graph.ExtractEpisode(graph_pb2.ExtractEpisodeRequest(all_failed=False)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "all_failed",
    )
    await expect_status(
        gh.graph.ExtractEpisode(graph_pb2.ExtractEpisodeRequest(episode_id=999)),
        grpc.StatusCode.NOT_FOUND,
        "999",
    )


async def test_each_session_outside_a_project_has_its_own_graph(gh, stub):
    """Sessions with no project never share entities: not in the prompt, not
    in a listing, not in a search, and no edge may join their graphs."""
    answer = {
        "entities": [{"name": "Alice", "type": "person", "notes": "a private person"}],
        "relationships": [],
    }
    stub.default = Reply.of(answer)
    s1, s2 = await new_session(gh), await new_session(gh)
    ev1 = await event_for(gh, (await new_episode(gh, s1.id, "first session talk")).id)
    ev2 = await event_for(gh, (await new_episode(gh, s2.id, "second session talk")).id)
    [a1], [a2] = ev1.entities, ev2.entities
    assert a1.id != a2.id
    assert (a1.project_id, a1.session_id) == (0, s1.id)
    assert (a2.project_id, a2.session_id) == (0, s2.id)
    # Session 2's prompt did not list session 1's Alice as a known entity.
    second = next(r for r in stub.requests_to("/api/chat") if "second session" in r.prompt_text())
    assert "Alice (person)" not in second.prompt_text()

    for s, own in ((s1, a1), (s2, a2)):
        listed = await gh.graph.ListEntities(graph_pb2.ListEntitiesRequest(session_id=s.id))
        assert [e.id for e in listed.entities] == [own.id]

    async def indexed() -> bool:
        return await gh.app.index.retrieve_ids("entities", [a1.id, a2.id]) == {a1.id, a2.id}

    await wait_until(indexed)
    for s, own in ((s1, a1), (s2, a2)):
        call = gh.graph.SearchEntities(
            graph_pb2.SearchEntitiesRequest(query="Alice", session_id=s.id, limit=10)
        )
        assert [h.entity.id async for h in call] == [own.id]

    # A manual upsert into a session's graph joins that graph's entity.
    again = await gh.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="alice", type="person", session_id=s1.id)
    )
    assert again.id == a1.id and again.mention_count == 2
    other = await gh.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="Bob", type="person", session_id=s2.id)
    )
    await expect_status(
        gh.graph.UpsertRelationship(
            graph_pb2.UpsertRelationshipRequest(from_id=a1.id, to_id=other.id, label="knows")
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        f"session {s1.id}",
    )

    # Bad scopes say what is wrong.
    p = await new_project(gh)
    in_project = await new_session(gh, p.id)
    bad = [
        (graph_pb2.SearchEntitiesRequest(query="Alice", limit=5), grpc.StatusCode.INVALID_ARGUMENT),
        (
            graph_pb2.SearchEntitiesRequest(
                query="Alice", project_id=p.id, session_id=s1.id, limit=5
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            graph_pb2.SearchEntitiesRequest(query="Alice", session_id=in_project.id, limit=5),
            grpc.StatusCode.FAILED_PRECONDITION,
        ),
        (
            graph_pb2.SearchEntitiesRequest(query="Alice", session_id=99999, limit=5),
            grpc.StatusCode.NOT_FOUND,
        ),
    ]
    for request, code in bad:
        await expect_status(_drain(gh.graph.SearchEntities(request)), code, "")
    await expect_status(
        gh.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name="X", type="person", session_id=in_project.id)
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        f"project {p.id}",
    )
    await expect_status(
        gh.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name="X", type="person", session_id=99999)
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "session_id 99999 does not exist",
    )
    await expect_status(
        gh.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(
                name="X", type="person", project_id=p.id, session_id=s1.id
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "not both",
    )
    await expect_status(
        gh.graph.ListEntities(graph_pb2.ListEntitiesRequest(session_id=s1.id, project_id=p.id)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "not both",
    )
    # None of the refusals wrote anything.
    assert (
        await gh.app.db.read_sql(
            lambda c: c.execute("SELECT COUNT(*) FROM entities WHERE name = 'X'").fetchone()[0]
        )
        == 0
    )


async def test_deleting_a_session_deletes_its_own_graph(gh, stub):
    stub.default = Reply.of({
        "entities": [{"name": "Carol", "type": "person", "notes": None},
                     {"name": "Quartz", "type": "project", "notes": None}],
        "relationships": [{"from": "Carol", "to": "Quartz", "label": "owns", "notes": None}],
    })  # fmt: skip
    gone, kept = await new_session(gh), await new_session(gh)
    ev_gone = await event_for(gh, (await new_episode(gh, gone.id, "to be deleted")).id)
    ev_kept = await event_for(gh, (await new_episode(gh, kept.id, "to be kept")).id)
    gone_ids = [e.id for e in ev_gone.entities]

    async def indexed() -> bool:
        ids = [*gone_ids, *(e.id for e in ev_kept.entities)]
        return await gh.app.index.retrieve_ids("entities", ids) == set(ids)

    await wait_until(indexed)
    await gh.memory.DeleteSession(memory_pb2.DeleteSessionRequest(id=gone.id))
    for entity_id in gone_ids:
        await expect_status(
            gh.graph.GetEntity(graph_pb2.GetEntityRequest(id=entity_id)), grpc.StatusCode.NOT_FOUND
        )

    async def points_gone() -> bool:
        return not await gh.app.index.retrieve_ids("entities", gone_ids)

    await wait_until(points_gone)
    listed = await gh.graph.ListEntities(graph_pb2.ListEntitiesRequest(session_id=kept.id))
    assert {e.id for e in listed.entities} == {e.id for e in ev_kept.entities}
    assert len(ev_kept.relationships) == 1


async def _drain(call) -> list:
    return [item async for item in call]


# Cut-off answers ----------------------------------------------------------------------


async def test_an_answer_cut_off_twice_fails_at_once_with_the_reason(gh, stub):
    looping = {
        "entities": [
            {"name": f"thing {i}", "type": "concept", "notes": "x" * 40} for i in range(200)
        ],
        "relationships": [],
    }
    stub.default = Reply.of(looping)  # ~3,000 stand-in tokens: past 1,500 and 3,000
    s = await new_session(gh)
    ep = await new_episode(gh, s.id)
    event = await event_for(gh, ep.id)
    assert event.status == graph_pb2.EXTRACTION_STATUS_FAILED
    assert "cut off" in event.error and "done_reason=length" in event.error
    # One attempt, retried once by the client with twice the room: not
    # job_max_attempts identical calls.
    assert [r["options"]["num_predict"] for r in stub.requests_to("/api/chat")] == [1500, 3000]
    episode = await gh.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=ep.id))
    assert episode.extraction_state == memory_pb2.JOB_STATE_FAILED
    assert "done_reason=length" in episode.extraction_error
    [(target, state, attempts, error)] = await job_rows(gh)
    assert (target, state) == (ep.id, "failed") and "done_reason=length" in error
