"""The data each console page builds from the server's answers
(console/reads.py), given a stand-in client (tests/unit/console_stand_ins.py):
an object answering the typed client's calls from a table of canned answers,
recording what it was asked.
No server, no channel: each test is what a page makes of what it was told.

A session, episode or memory of another project answered as not found here;
a timeline in time order; an episode's events read until each stage it
finished has its last event; archived memories read apart, page after page;
a memory's history naming what superseded it; the graph's walks (an entity's
or the hubs', with or without every interval, as of a date); the search
playground's stages and shared notes; /status's whole UTC buckets.

What the server answers through them (its own rules, its empty reasons,
its tenancy) stays whole-server in tests/e2e/console/test_console_app.py."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client import NexusClientError, NexusNotFound
from nexus_grpc.console import reads
from nexus_grpc.console.params import BadRequest
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.search.v1 import explanation_pb2
from tests.unit.console_stand_ins import (
    ATLAS,
    PROJECT,
    Answer,
    StandIn,
    Stream,
    by_id,
)


def at(seconds: int) -> Timestamp:
    return Timestamp(seconds=seconds)


async def refused_as_not_here(read: Any, *args: Any) -> str:
    with pytest.raises(NexusNotFound) as refused:
        await read(*args)
    assert refused.value.code == grpc.StatusCode.NOT_FOUND
    return refused.value.message


# A project's timeline ------------------------------------------------------------


def _episode(i: int, session: int, occurred: int = 0, **states: int) -> memory_pb2.Episode:
    found = memory_pb2.Episode(id=i, session_id=session, user_message=f"said {i}", **states)
    if occurred:
        found.occur_time.CopyFrom(at(occurred))
    return found


async def test_a_timeline_is_in_the_order_things_were_said_then_by_id():
    client = StandIn(
        get_project=ATLAS,
        list_sessions=memory_pb2.ListSessionsResponse(
            sessions=[memory_pb2.Session(id=1, project_id=PROJECT, user_id="alice")],
            next_page_token="sessions-2",
        ),
        list_episodes=memory_pb2.ListEpisodesResponse(
            episodes=[_episode(9, 1, 2000), _episode(4, 1, 3000), _episode(5, 1, 2000),
                      _episode(3, 1)],
            next_page_token="more",
        ),
    )  # fmt: skip
    view = await reads.project(client, PROJECT, {})
    [session] = view["sessions"]
    # No time first (an empty time sorts before any), then by time, then by id.
    assert [e["id"] for e in session["episodes"]] == [3, 5, 9, 4]
    assert session["next_episodes_token"] == "more"
    assert view["next_page_token"] == "sessions-2" and view["session_id"] == 0
    # Each session shows its first few episodes; the session's own view the rest.
    assert client.asked("list_episodes") == [
        {"session_id": 1, "page_size": reads.EPISODES_PER_SESSION}
    ]


async def test_one_sessions_view_pages_through_its_episodes():
    client = StandIn(
        get_project=ATLAS,
        get_session=memory_pb2.Session(id=2, project_id=PROJECT, user_id="bob"),
        list_episodes=memory_pb2.ListEpisodesResponse(episodes=[_episode(8, 2)]),
    )
    view = await reads.project(client, PROJECT, {"session_id": "2", "page_token": "p2"})
    assert view["session_id"] == 2 and view["next_page_token"] == ""
    assert [s["user_id"] for s in view["sessions"]] == ["bob"]
    assert client.asked("list_episodes") == [
        {"session_id": 2, "page_size": reads.EPISODES_PER_PAGE, "page_token": "p2"}
    ]
    assert not client.asked("list_sessions")


async def test_a_session_of_another_project_is_not_found_here():
    client = StandIn(
        get_project=ATLAS, get_session=memory_pb2.Session(id=2, project_id=PROJECT + 1)
    )
    message = await refused_as_not_here(reads.project, client, PROJECT, {"session_id": "2"})
    assert message == f"session 2 is not in project {PROJECT}"
    assert not client.asked("list_episodes")  # nothing of it is read


async def test_the_project_list_shows_each_projects_counts():
    projects = [memory_pb2.Project(id=1, name="A"), memory_pb2.Project(id=2, name="B")]
    client = StandIn(
        list_projects=memory_pb2.ListProjectsResponse(projects=projects, next_page_token="n"),
        get_project_stats=lambda project_id, **_: memory_pb2.ProjectStats(
            project_id=project_id, episodes=10 * project_id
        ),
    )
    view = await reads.index(client, {"page_token": "t"})
    assert [(p["name"], p["stats"]["episodes"]) for p in view["projects"]] == [("A", 10), ("B", 20)]
    assert view["next_page_token"] == "n"
    assert client.asked("list_projects") == [
        {"page_size": reads.PROJECTS_PER_PAGE, "page_token": "t"}
    ]


# An episode and what it produced --------------------------------------------------

DONE, FAILED, PENDING = (
    memory_pb2.JOB_STATE_DONE,
    memory_pb2.JOB_STATE_FAILED,
    memory_pb2.JOB_STATE_PENDING,
)
EXTRACTION = graph_pb2.EXTRACTION_EVENT_STAGE_EXTRACTION
FORMATION = graph_pb2.EXTRACTION_EVENT_STAGE_MEMORY_FORMATION


def _event(stage: int, status: int, **fields: Any) -> graph_pb2.ExtractionEvent:
    return graph_pb2.ExtractionEvent(episode_id=4, stage=stage, status=status, **fields)


def _episode_client(found: memory_pb2.Episode, **more: Any) -> StandIn:
    return StandIn(
        get_episode=found,
        get_session=memory_pb2.Session(id=1, project_id=PROJECT, user_id="alice"),
        get_project=ATLAS,
        **more,
    )


async def test_an_episode_of_another_projects_session_is_not_found_here():
    client = StandIn(
        get_episode=_episode(4, 1),
        get_session=memory_pb2.Session(id=1, project_id=PROJECT + 1),
        get_project=ATLAS,
    )
    message = await refused_as_not_here(reads.episode, client, PROJECT, 4)
    assert message == f"episode 4 is not in project {PROJECT}"


async def test_the_events_are_read_until_each_finished_stage_has_its_last():
    """A retried extraction failed before it was done: its first event is not
    its last. The read stops at the last event each stage owes, not before."""
    entities = [graph_pb2.Entity(id=1, name="Alice"), graph_pb2.Entity(id=2, name="Lisbon")]
    facts = [
        graph_pb2.Relationship(id=5, from_id=1, to_id=2, label="lives_in"),
        graph_pb2.Relationship(id=6, from_id=1, to_id=99, label="knows"),
    ]
    formed = graph_pb2.MemoryFormationOutcome(
        proposed=2, operations=[graph_pb2.MemoryOperation(memory_id=30, content="Likes tea")]
    )
    after = _event(EXTRACTION, graph_pb2.EXTRACTION_STATUS_DONE)  # never read
    stream = Stream([
        _event(EXTRACTION, graph_pb2.EXTRACTION_STATUS_FAILED, error="timeout"),
        _event(EXTRACTION, graph_pb2.EXTRACTION_STATUS_DONE, entities=entities,
               relationships=facts),
        _event(FORMATION, graph_pb2.EXTRACTION_STATUS_DONE, memory_formation=formed),
        after,
    ])  # fmt: skip
    client = _episode_client(
        _episode(4, 1, extraction_state=DONE, memory_state=DONE), watch_extractions=stream
    )
    view = await reads.episode(client, PROJECT, 4)
    produced = view["produced"]
    assert stream.read == 3 and stream.cancelled
    assert client.asked("watch_extractions") == [{"episode_id": 4}]
    extraction = produced["extraction"]
    assert extraction["status"] == "done" and extraction["error"] == ""
    # Each fact names its ends; an entity the event did not carry, by its id.
    assert [(f["from_name"], f["label"], f["to_name"]) for f in extraction["facts"]] == [
        ("Alice", "lives_in", "Lisbon"),
        ("Alice", "knows", "entity 99"),
    ]
    formation = produced["formation"]
    assert formation["proposed"] == 2
    assert [o["memory_id"] for o in formation["operations"]] == [30]
    # With its formation's record, the memories are not read from the memories.
    assert produced["formed"] == [] and produced["problem"] == ""
    assert not client.asked("list_memories")


async def test_a_failed_extraction_is_shown_failed_and_a_pending_one_is_not_waited_for():
    failed = Stream([_event(EXTRACTION, graph_pb2.EXTRACTION_STATUS_FAILED, error="no LLM")])
    client = _episode_client(
        _episode(4, 1, extraction_state=FAILED, memory_state=PENDING), watch_extractions=failed
    )
    produced = (await reads.episode(client, PROJECT, 4))["produced"]
    assert produced["extraction"]["status"] == "failed"
    assert produced["extraction"]["error"] == "no LLM"
    assert produced["formation"] is None and produced["formed"] == []
    # Nothing finished: nothing to replay.
    waiting = _episode_client(_episode(4, 1, extraction_state=PENDING, memory_state=PENDING))
    nothing = (await reads.episode(waiting, PROJECT, 4))["produced"]
    assert nothing == {"extraction": None, "formation": None, "formed": [], "problem": ""}
    assert not waiting.asked("watch_extractions")


async def test_without_a_formation_record_the_memories_formed_are_read_from_the_memories():
    pages = {
        "": memory_pb2.ListMemoriesResponse(
            memories=[memory_pb2.Memory(id=1, source_episode_id=4),
                      memory_pb2.Memory(id=2, source_episode_id=5)],
            next_page_token="p2",
        ),
        "p2": memory_pb2.ListMemoriesResponse(memories=[
            memory_pb2.Memory(id=3, source_episode_id=4, tier=memory_pb2.TIER_ARCHIVE)
        ]),
    }  # fmt: skip
    client = _episode_client(
        _episode(4, 1, extraction_state=PENDING, memory_state=DONE),
        watch_extractions=Stream([]),
        list_memories=lambda page_token, **_: pages[page_token],
    )
    produced = (await reads.episode(client, PROJECT, 4))["produced"]
    assert [(m["id"], m["live"]) for m in produced["formed"]] == [(1, True), (3, False)]
    # The session's user's memories and the project's, every tier.
    scope = client.asked("list_memories")[0]["scope"]
    assert (scope.project_id, scope.user_id, scope.include_archived) == (PROJECT, "alice", True)
    refused = _episode_client(
        _episode(4, 1, memory_state=DONE),
        watch_extractions=Stream([]),
        list_memories=NexusClientError(grpc.StatusCode.PERMISSION_DENIED, "not yours"),
    )
    # Memories the key may not read are not shown; the page still is.
    assert (await reads.episode(refused, PROJECT, 4))["produced"]["formed"] == []


async def test_a_replay_the_server_refuses_says_why_on_the_page():
    refusal = NexusClientError(grpc.StatusCode.PERMISSION_DENIED, "not this key's")
    retried = _event(EXTRACTION, graph_pb2.EXTRACTION_STATUS_FAILED, error="timeout")
    client = _episode_client(
        _episode(4, 1, extraction_state=DONE), watch_extractions=Stream([retried], error=refusal)
    )
    produced = (await reads.episode(client, PROJECT, 4))["produced"]
    assert produced["problem"] == "PERMISSION_DENIED: not this key's"
    # What was read before the refusal is shown, for what it is.
    assert produced["extraction"]["status"] == "failed"
    assert client.asked("watch_extractions") and client.answers["watch_extractions"].cancelled


async def test_the_live_states_are_each_episodes_three_jobs_and_a_deleted_one_is_left_out():
    table = {1: _episode(1, 1, embedding_state=DONE, extraction_state=PENDING)}
    client = StandIn(get_episode=by_id(table, "episode"))
    states = await reads.episode_states(client, [1, 2])
    assert states == [{
        "id": 1, "embedding_state": "done", "embedding_error": "",
        "extraction_state": "pending", "extraction_error": "",
        "memory_state": "unspecified", "memory_error": "",
    }]  # fmt: skip


# Memories --------------------------------------------------------------------------


def _memory(i: int, episode: int = 0, archived: bool = False, project: int = PROJECT):
    tier = memory_pb2.TIER_ARCHIVE if archived else memory_pb2.TIER_LONGTERM
    return memory_pb2.Memory(
        id=i, project_id=project, user_id="alice", tier=tier, content=f"memory {i}",
        source_episode_id=episode,
    )  # fmt: skip


def _memories_client(live: list, pages: dict[str, Any] | None = None, **more: Any) -> StandIn:
    """Live memories (include_archived false); archived reads from ``pages``."""

    def listed(scope: memory_pb2.MemoryScope, page_token: str = "", **_: Any) -> Any:
        if not scope.include_archived:
            return Answer(memory_pb2.ListMemoriesResponse(memories=live), "NOTHING_STORED: none")
        return (pages or {})[page_token]

    return StandIn(
        get_project=ATLAS,
        get_project_stats=memory_pb2.ProjectStats(
            users=[memory_pb2.UserMemoryCount(user_id="alice", memories=2)], user_count=1
        ),
        list_memories=listed,
        **more,
    )


async def test_the_memories_page_reads_archived_ones_apart_page_after_page():
    """The server lists every tier together: the archived page reads on until
    it has a page's worth or the list ends, and says where to go on."""
    size = reads.MEMORIES_PER_PAGE
    pages = {
        "": memory_pb2.ListMemoriesResponse(
            memories=[_memory(1), _memory(2, archived=True)], next_page_token="b"
        ),
        "b": memory_pb2.ListMemoriesResponse(
            memories=[_memory(100 + n, archived=True) for n in range(size)],
            next_page_token="c",
        ),
    }
    client = _memories_client([_memory(1)], pages)
    view = await reads.memories(client, PROJECT, {"user_id": "alice", "include_archived": "1"})
    assert [m["id"] for m in view["memories"]] == [1] and view["memories"][0]["live"]
    assert [m["id"] for m in view["archived"]][:2] == [2, 100]
    assert len(view["archived"]) == size + 1 and not any(m["live"] for m in view["archived"])
    assert view["next_archived_token"] == "c"  # stopped once a page's worth was found
    assert [u["user_id"] for u in view["users"]] == ["alice"] and view["user_count"] == 1
    # Without the flag the archive is not read at all.
    plain = _memories_client([_memory(1)])
    view = await reads.memories(plain, PROJECT, {"user_id": "alice"})
    assert view["archived"] == [] and view["next_archived_token"] == ""
    assert len(plain.asked("list_memories")) == 1


async def test_an_empty_first_page_of_memories_says_the_servers_reason_and_a_later_one_not():
    client = _memories_client([])
    first = await reads.memories(client, PROJECT, {})
    assert first["empty_reason"] == "NOTHING_STORED: none"
    later = await reads.memories(client, PROJECT, {"page_token": "p9"})
    assert later["empty_reason"] == ""


async def test_a_memorys_history_names_what_superseded_it_and_when_each_was_said():
    revisions = memory_pb2.ListMemoryHistoryResponse(
        revisions=[
            memory_pb2.MemoryRevision(id=1, memory_id=3, episode_id=11, changed_fields=["content"]),
            memory_pb2.MemoryRevision(id=2, memory_id=3, episode_id=12, changed_fields=["tier"]),
            memory_pb2.MemoryRevision(id=3, memory_id=3, changed_fields=["tier"]),
        ],
        next_page_token="older",
    )
    formed = memory_pb2.ListMemoriesResponse(
        memories=[_memory(3, episode=12), _memory(8, episode=12), _memory(9, episode=11)]
    )
    episodes = {n: _episode(n, 1, 1_700_000_000 + n) for n in (10, 11, 12)}
    client = _memories_client(
        [_memory(1, episode=10), _memory(2, episode=404)],
        {"": formed},
        get_memory=_memory(3, episode=10, archived=True),
        list_memory_history=revisions,
        get_episode=by_id(episodes, "episode"),
    )
    view = await reads.memories(client, PROJECT, {"user_id": "alice", "memory_id": "3"})
    selected = view["selected"]
    assert selected["memory"]["id"] == 3 and not selected["memory"]["live"]
    assert selected["more_revisions"]
    # Archived by episode 12's formation: what 12 formed (but the memory itself).
    assert [r["superseded_by"] for r in selected["revisions"]] == [[], [8], []]
    assert client.asked("get_memory") == [{"id": 3, "user_id": "alice"}]
    # When each episode a memory or revision came from was said; a deleted
    # episode (404) has none, and no episode (0) is not asked about.
    assert view["episode_times"] == {
        10: "2023-11-14T22:13:30Z",
        11: "2023-11-14T22:13:31Z",
        12: "2023-11-14T22:13:32Z",
    }
    assert sorted(a["id"] for a in client.asked("get_episode")) == [10, 11, 12, 404]


async def test_a_memory_of_another_project_is_not_found_here():
    client = _memories_client(
        [], get_memory=_memory(3, project=PROJECT + 1),
        list_memory_history=memory_pb2.ListMemoryHistoryResponse(),
    )  # fmt: skip
    message = await refused_as_not_here(reads.memories, client, PROJECT, {"memory_id": "3"})
    assert message == f"memory 3 is not in project {PROJECT}"
    # A USER memory of no project is the project's to show.
    shared = _memories_client(
        [], get_memory=_memory(3, project=0),
        list_memory_history=memory_pb2.ListMemoryHistoryResponse(),
    )  # fmt: skip
    view = await reads.memories(shared, PROJECT, {"memory_id": "3"})
    assert view["selected"]["memory"]["id"] == 3


# The graph ----------------------------------------------------------------------------

ALICE = graph_pb2.Entity(id=1, name="Alice", type="person", project_id=PROJECT)
LISBON = graph_pb2.Entity(id=2, name="Lisbon", type="place", project_id=PROJECT)
PORTO = graph_pb2.Entity(id=3, name="Porto", type="place", project_id=PROJECT)
MARCH, JUNE = 1_709_251_200, 1_717_200_000  # 2024-03-01, 2024-06-01


def _fact(i: int, to: int, began: int, ended: int = 0) -> graph_pb2.Relationship:
    edge = graph_pb2.Relationship(id=i, from_id=1, to_id=to, label="lives_in")
    edge.valid_time.CopyFrom(at(began))
    if ended:
        edge.invalid_time.CopyFrom(at(ended))
    return edge


LIVED = _fact(10, 2, MARCH, JUNE)
LIVES = _fact(11, 3, JUNE)
NOW_ONLY = graph_pb2.Subgraph(nodes=[ALICE, PORTO], edges=[LIVES])
EVERY = graph_pb2.Subgraph(nodes=[ALICE, LISBON, PORTO], edges=[LIVED, LIVES])


def _neighbourhood(include_history: bool = False, **_: Any) -> graph_pb2.Subgraph:
    return EVERY if include_history else NOW_ONLY


def _entity_client(entity: graph_pb2.Entity = ALICE) -> StandIn:
    return StandIn(
        get_project=ATLAS,
        get_entity=entity,
        get_neighborhood=_neighbourhood,
        list_entity_aliases=graph_pb2.ListEntityAliasesResponse(
            aliases=[graph_pb2.EntityAlias(entity_id=1, name="Ali")]
        ),
        list_merges=graph_pb2.ListMergesResponse(),
    )


async def test_an_entitys_graph_now_with_the_slider_and_layout_over_every_interval():
    client = _entity_client()
    view = await reads.graph(client, PROJECT, {"entity_id": "1", "depth": "2"})
    assert view["entity"]["name"] == "Alice" and [a["name"] for a in view["aliases"]] == ["Ali"]
    # Drawn: the facts that hold now; Lisbon is not drawn, but laid out.
    assert [n["name"] for n in view["nodes"]] == ["Alice", "Porto"]
    assert [e["to_name"] for e in view["edges"]] == ["Porto"]
    assert sorted(n[2] for n in view["layout"]["nodes"]) == ["Alice", "Lisbon", "Porto"]
    slider = view["slider"]
    assert slider["marks"] == ["2024-03-01T00:00:00Z", "2024-06-01T00:00:00Z"]
    # The facts' span, 5% of it on either side: not the years since.
    assert (slider["min"], slider["last"]) == ("2024-02-25T09:36:00Z", "2024-06-01T00:00:00Z")
    assert slider["max"] == "2024-06-05T14:24:00Z"
    walks = client.asked("get_neighborhood")
    assert walks == [
        {"entity_id": 1, "depth": 2, "include_history": False},
        {"entity_id": 1, "depth": 2, "include_history": True},
    ]


async def test_the_slider_asks_for_no_second_walk_and_no_layout():
    client = _entity_client()
    view = await reads.graph(client, PROJECT, {"entity_id": "1", "marks": "0"})
    assert view["layout"] is None
    assert client.asked("get_neighborhood") == [
        {"entity_id": 1, "depth": 1, "include_history": False}
    ]
    # No marks either: the slider keeps those of the page's first load.
    assert view["slider"] is None
    assert [e["to_name"] for e in view["edges"]] == ["Porto"]


async def test_a_graph_as_of_a_date_hides_an_entity_before_its_first_fact():
    """As of April 2024 (the server answers the walk as of then): Porto, seen
    only from June, is not drawn even when the walk returns it."""
    then = graph_pb2.Subgraph(nodes=[ALICE, LISBON, PORTO], edges=[LIVED])
    client = _entity_client()
    client.answers["get_neighborhood"] = lambda include_history, **kw: (
        EVERY if include_history else then
    )
    view = await reads.graph(
        client, PROJECT, {"entity_id": "1", "as_of": "2024-04-01", "marks": "0"}
    )
    assert view["as_of"] == "2024-04-01T00:00:00Z"
    assert [(n["name"], n["held"]) for n in view["nodes"]] == [("Alice", True), ("Lisbon", True)]
    drawn, history = client.asked("get_neighborhood")
    assert drawn["as_of"].seconds == 1_711_929_600 and not drawn["include_history"]
    assert history == {"entity_id": 1, "depth": 1, "include_history": True}


async def test_the_whole_history_is_drawn_with_ended_facts_told_apart():
    client = _entity_client()
    view = await reads.graph(client, PROJECT, {"entity_id": "1", "include_history": "1"})
    assert [(e["to_name"], e["current"], e["ended"]) for e in view["edges"]] == [
        ("Lisbon", False, True),
        ("Porto", True, False),
    ]
    # The walk with every interval is the one drawn: no second one.
    assert client.asked("get_neighborhood") == [
        {"entity_id": 1, "depth": 1, "include_history": True}
    ]


async def test_an_entity_of_another_project_is_not_found_here():
    client = _entity_client(graph_pb2.Entity(id=1, name="Alice", project_id=PROJECT + 1))
    message = await refused_as_not_here(reads.graph, client, PROJECT, {"entity_id": "1"})
    assert message == f"entity 1 is not in project {PROJECT}"


async def test_without_an_entity_the_graph_starts_from_the_projects_hubs():
    client = StandIn(
        get_project=ATLAS,
        get_project_stats=memory_pb2.ProjectStats(top_entity_ids=[3, 1]),
        get_neighbors=lambda include_history=False, **_: _neighbourhood(include_history),
    )
    view = await reads.graph(client, PROJECT, {})
    assert [n["name"] for n in view["nodes"]] == ["Porto", "Alice"]  # the hubs, as ranked
    assert not view["empty"]
    [stats] = client.asked("get_project_stats")
    assert stats["top_entities"] == reads.GRAPH_SEEDS
    assert list(stats["read_mask"].paths) == ["top_entity_ids"]
    assert [w["entity_ids"] for w in client.asked("get_neighbors")] == [[3, 1], [3, 1]]


async def test_a_graph_with_no_hub_is_empty_and_says_the_servers_reason():
    client = StandIn(
        get_project=ATLAS,
        get_project_stats=memory_pb2.ProjectStats(),
        list_entities=Answer(graph_pb2.ListEntitiesResponse(), "NOTHING_STORED: no entity"),
    )
    view = await reads.graph(client, PROJECT, {})
    assert view["empty"] and view["empty_reason"] == "NOTHING_STORED: no entity"
    assert view["nodes"] == [] and view["slider"] is None and view["layout"]["nodes"] == []
    assert not client.asked("get_neighbors")


# Search -------------------------------------------------------------------------------


def _hit(i: int, *stages: tuple[str, int, str], degraded: str = "") -> memory_pb2.SearchHit:
    explanation = explanation_pb2.Explanation(
        stages=[explanation_pb2.StageScore(stage=s, rank=r, note=n) for s, r, n in stages]
    )
    return memory_pb2.SearchHit(
        episode=memory_pb2.Episode(id=i), score=1.0 / i, explanation=explanation,
        degraded_reason=degraded,
    )  # fmt: skip


async def test_the_playground_lists_every_stage_in_order_and_a_note_all_hits_share_once():
    skipped = "skipped: no reranker"
    hits = [
        _hit(1, ("keyword", 1, "matched: lisbon"), ("fused", 1, ""), ("reranked", 0, skipped)),
        _hit(2, ("semantic", 1, ""), ("fused", 2, ""), ("reranked", 0, skipped)),
    ]
    client = StandIn(get_project=ATLAS, search_episodes=Stream(hits))
    view = await reads.search(client, PROJECT, {"q": "lisbon", "mode": "Keyword"})
    assert view["mode"] == "keyword" and view["kind"] == "episodes"
    assert view["stages"] == ["keyword", "fused", "reranked", "semantic"]
    assert [h["rank"] for h in view["hits"]] == [1, 2]
    assert view["hits"][1]["stage_scores"]["fused"]["rank"] == 2
    # A note every hit carries, of a stage that ranked none of them: once.
    assert view["stage_notes"] == {"reranked": skipped}
    [asked] = client.asked("search_episodes")
    assert asked["mode"] == memory_pb2.SEARCH_MODE_KEYWORD and asked["explain"]
    assert asked["limit"] == reads.SEARCH_LIMIT


async def test_a_degraded_answer_says_why_from_its_hits_or_else_from_the_stream():
    down = "semantic: the embedding server is down"
    client = StandIn(
        get_project=ATLAS,
        search_episodes=Stream([_hit(1), _hit(2, degraded=down)], degraded_reason="trailer"),
    )
    view = await reads.search(client, PROJECT, {"q": "where is Lisbon now"})
    assert view["degraded_reason"] == down and [h["rank"] for h in view["hits"]] == [1, 2]
    trailer = StandIn(get_project=ATLAS, search_episodes=Stream([_hit(1)], degraded_reason="t"))
    assert (await reads.search(trailer, PROJECT, {"q": "x"}))["degraded_reason"] == "t"


async def test_no_hits_say_the_servers_reason_and_no_query_asks_nothing():
    empty = Stream([], empty_reason="NOTHING_STORED: no exchange is stored in this project yet")
    client = StandIn(get_project=ATLAS, search_memories=empty)
    view = await reads.search(client, PROJECT, {"q": "x", "kind": "memories", "user_id": "bob"})
    assert view["hits"] == [] and view["empty_reason"] == empty.empty_reason
    [asked] = client.asked("search_memories")
    assert (asked["scope"].user_id, asked["scope"].include_archived) == ("bob", False)
    idle = StandIn(get_project=ATLAS)
    view = await reads.search(idle, PROJECT, {})
    assert view["hits"] == [] and view["q"] == "" and [c for c, _ in idle.calls] == ["get_project"]


async def test_entity_search_has_one_mode_refused_once_the_project_is_read():
    client = StandIn(get_project=ATLAS, search_entities=Stream([]))
    with pytest.raises(BadRequest) as refused:
        await reads.search(client, PROJECT, {"q": "x", "kind": "entities", "mode": "keyword"})
    assert refused.value.field == "mode" and "entity search has one mode" in refused.value.message
    assert [c for c, _ in client.calls] == ["get_project"]
    view = await reads.search(client, PROJECT, {"q": "x", "kind": "entities"})
    assert view["kind"] == "entities" and client.asked("search_entities")[0]["explain"]


# The service ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "bucket", "seconds", "count"),
    [("day", memory_pb2.USAGE_BUCKET_HOUR, 3600, 24), ("week", memory_pb2.USAGE_BUCKET_DAY,
     86_400, 7)],
)  # fmt: skip
async def test_status_reads_usage_in_whole_utc_buckets_the_current_one_last(
    window, bucket, seconds, count
):
    client = StandIn(
        get_service_status=memory_pb2.ServiceStatus(state="SERVING", tenant="acme"),
        get_usage=memory_pb2.GetUsageResponse(tenant="acme"),
    )
    now = int(reads._now().timestamp())
    view = await reads.status(client, {"window": window.upper()})
    assert view["usage_window"] == window and view["tenant"] == "acme"
    assert view["usage"]["tenant"] == "acme"
    [asked] = client.asked("get_usage")
    start, end = asked["start_time"].seconds, asked["end_time"].seconds
    assert asked["bucket"] == bucket
    assert start % seconds == 0 and end - start == count * seconds
    assert end - seconds <= now < end  # this second is in the last bucket
