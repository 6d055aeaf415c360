"""A session's writes act for its user (docs/security.md, "Sessions that belong to a user").

The fourth probe found Carol's key, in Alice's tenant, writing episodes into
Alice's session; memory formation then rewrote Alice's memories ("lives in
Lisbon" became "lives in Porto", an UPDATE recorded by Carol's episode),
ExtractEpisode brought back a memory Alice had deleted, UpdateSession moved
Alice's session into Carol's project, and the watch event's LLM calls told
Carol whether Alice already held a similar memory. Here every write into a
session with a user is walked as Carol and refused with PERMISSION_DENIED,
writing nothing; the user's own key, a ``*`` key and an admin key may write;
formation checks the writer's right again in the worker; and watchers that
may not act for the user see no formation detail. Real server, the Ollama
stand-in, both stores.
"""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from tests.graph_support import EMPTY, expect_status, start_graph_harness
from tests.ollama_stub import Reply
from tests.support import Harness, bearer, take

BOTH_STORES = True
STUB_DEFAULT_REPLY = EMPTY

ALICE = bearer("rights-alice-key-000001")
CAROL = bearer("rights-carol-key-000001")
STAR = bearer("rights-star-key-0000001")
ADMIN = bearer("rights-admin-key-000001")
DENIED = grpc.StatusCode.PERMISSION_DENIED
LISBON = "I live in Lisbon near the river."
PORTO = "Big news: I moved to Porto last month."


@pytest.fixture
async def team(tmp_path, stub, store_settings):
    """One tenant: Alice's key, Carol's key, a ``*`` key and an admin key."""
    keys = tmp_path / "keys.json"
    entries = [
        ("rights-alice-key-000001", "alice-app", ["alice"], False),
        ("rights-carol-key-000001", "carol-app", ["carol"], False),
        ("rights-star-key-0000001", "star-app", "*", False),
        ("rights-admin-key-000001", "ops", "*", True),
    ]
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": k, "name": n, "users": u, "admin": a, "tenant": "team"}
                    for k, n, u, a in entries
                ]
            }
        )
    )
    h = await start_graph_harness(
        tmp_path / "data", stub, auth_keys_file=str(keys), **store_settings
    )
    yield h
    await h.close()


def remember(stub, user_message: str, content: str) -> None:
    """The stand-in's extraction answer for ``user_message``: one USER memory."""
    stub.add_rule(
        {
            **EMPTY,
            "ended": [],
            "memories": [
                {"about": "user", "title": content[:30], "content": content,
                 "tier": "longterm", "quote": user_message.split(" near")[0]}
            ],
        },
        contains=f"User message:\n{user_message}\n",
    )  # fmt: skip


def decide_update(stub) -> None:
    """Formation's question answered: the candidate UPDATEs the first kept memory."""

    def respond(endpoint: str, body: dict) -> Reply | None:
        prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
        if "Kept memories:" not in prompt:
            return None
        kept = prompt.split("- id ", 1)[1].split(" ", 1)[0].rstrip(":")
        return Reply.of(
            {"decisions": [{"candidate": 1, "action": "UPDATE",
                            "memory_id": int(kept), "reason": "moved"}]}
        )  # fmt: skip

    stub.responder = respond


async def formed(
    h: Harness, episode_id: int, key, formations: int = 1
) -> list[graph_pb2.ExtractionEvent]:
    """Every event of the episode up to the one that ends its ``formations``-th
    memory formation (as an admin sees them), then the same events as ``key``
    sees them."""
    seen: list[graph_pb2.ExtractionEvent] = []
    call = h.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(episode_id=episode_id), metadata=ADMIN
    )
    try:
        while sum(e.HasField("memory_formation") for e in seen) < formations:
            seen += await take(call, 1, 30)
    finally:
        call.cancel()
    replay = h.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(episode_id=episode_id), metadata=key
    )
    try:
        return await take(replay, len(seen), 30)
    finally:
        replay.cancel()


async def alices_world(h: Harness, stub):
    """Alice's project (forming USER memories), her session and her first
    episode, whose memory has formed."""
    m = h.memory
    project = await m.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="pf")), metadata=ALICE
    )
    session = await m.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(project_id=project.id, user_id="alice", name="alice's")
        ),
        metadata=ALICE,
    )
    remember(stub, LISBON, "The user lives in Lisbon.")
    episode = await m.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=LISBON),
        metadata=ALICE,
    )
    await formed(h, episode.id, ALICE)
    return project, session, episode


async def alices_memories(h: Harness, project_id: int) -> list[tuple[int, str]]:
    page = await h.memory.ListMemories(
        memory_pb2.ListMemoriesRequest(
            scope=memory_pb2.MemoryScope(
                project_id=project_id, user_id="alice", include_archived=True
            ),
            page_size=100,
        ),
        metadata=ALICE,
    )
    return [(mem.id, mem.content) for mem in page.memories]


async def test_a_key_that_may_not_act_for_the_user_writes_nothing_into_their_session(team, stub):
    m, g, s = team.memory, team.graph, team.summary
    project, session, episode = await alices_world(team, stub)
    before = await alices_memories(team, project.id)
    assert [c for _, c in before] == ["The user lives in Lisbon."]
    carols = await m.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="carol's")), metadata=CAROL
    )
    remember(stub, PORTO, "The user lives in Porto.")
    decide_update(stub)

    text = await expect_status(
        m.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=PORTO),
            metadata=CAROL,
        ),
        DENIED,
        "belongs to user 'alice'",
    )
    assert "rights-carol" not in text  # the refusal never quotes a key
    imported = await m.ImportEpisodes(
        iter(
            [
                memory_pb2.ImportEpisodesRequest(
                    episode=memory_pb2.CreateEpisodeRequest(
                        session_id=session.id, user_message=PORTO, request_id="carol-1"
                    )
                )
            ]
        ),
        metadata=CAROL,
    )
    assert (imported.created, imported.failed) == (0, 1)
    assert imported.errors[0].code == DENIED.value[0]
    await expect_status(
        g.ExtractEpisode(graph_pb2.ExtractEpisodeRequest(episode_id=episode.id), metadata=CAROL),
        DENIED,
    )
    for paths, values in (
        (["project_id"], memory_pb2.Session(id=session.id, project_id=carols.id)),
        (["name"], memory_pb2.Session(id=session.id, name="carol was here")),
    ):
        await expect_status(
            m.UpdateSession(
                memory_pb2.UpdateSessionRequest(session=values, update_mask=FieldMask(paths=paths)),
                metadata=CAROL,
            ),
            DENIED,
        )
    await expect_status(
        m.DeleteEpisode(memory_pb2.DeleteEpisodeRequest(id=episode.id), metadata=CAROL), DENIED
    )
    await expect_status(
        m.DeleteSession(memory_pb2.DeleteSessionRequest(id=session.id), metadata=CAROL), DENIED
    )
    await expect_status(
        s.SummarizeSession(
            summary_pb2.SummarizeSessionRequest(session_id=session.id), metadata=CAROL
        ),
        DENIED,
    )
    await expect_status(
        s.CreateSummary(
            summary_pb2.CreateSummaryRequest(
                summary=summary_pb2.Summary(session_id=session.id, content="carol's version")
            ),
            metadata=CAROL,
        ),
        DENIED,
    )

    # Nothing was written: the session, its one episode, Alice's memory.
    got = await m.GetSession(memory_pb2.GetSessionRequest(id=session.id), metadata=ALICE)
    assert (got.project_id, got.name) == (project.id, "alice's")
    listed = await m.ListEpisodes(
        memory_pb2.ListEpisodesRequest(session_id=session.id), metadata=ALICE
    )
    assert [e.id for e in listed.episodes] == [episode.id]
    summaries = await s.ListSummaries(
        summary_pb2.ListSummariesRequest(session_id=session.id), metadata=ALICE
    )
    assert list(summaries.summaries) == []
    assert await alices_memories(team, project.id) == before

    # Alice's own key, a '*' key and an admin key may write into it; the
    # episode the '*' key wrote acts for alice, so her memory updates.
    for key in (ALICE, ADMIN):
        await m.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=f"note {key}"),
            metadata=key,
        )
    moved = await m.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=PORTO), metadata=STAR
    )
    await formed(team, moved.id, ALICE)
    assert [c for _, c in await alices_memories(team, project.id)] == ["The user lives in Porto."]


async def test_watchers_that_may_not_act_for_the_user_see_no_formation_detail(team, stub):
    project, session, _ = await alices_world(team, stub)
    remember(stub, PORTO, "The user lives in Porto.")
    decide_update(stub)
    moved = await team.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=PORTO),
        metadata=ALICE,
    )
    # Alice sees her formation: an UPDATE, decided by one LLM call (she held
    # a similar memory).
    [op] = [
        op
        for e in await formed(team, moved.id, ALICE)
        if e.HasField("memory_formation")
        for op in e.memory_formation.operations
    ]
    assert op.action == graph_pb2.MEMORY_ACTION_UPDATE and op.user_id == "alice"
    mine = [e for e in await formed(team, moved.id, ALICE) if e.HasField("memory_formation")]
    assert mine[0].memory_formation.llm_calls == 1
    # Carol hears the same events, without any of it: no operations, no count
    # of LLM calls that would tell her Alice held a similar memory.
    carols = await formed(team, moved.id, CAROL)
    assert [e.event_id for e in carols] == [
        e.event_id for e in await formed(team, moved.id, ALICE)
    ]
    assert not any(e.HasField("memory_formation") for e in carols)
    # So does a stream over the whole project.
    call = team.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(project_id=project.id), metadata=CAROL
    )
    try:
        everything = await take(call, len(carols) * 2, 30)
    finally:
        call.cancel()
    assert not any(e.HasField("memory_formation") for e in everything)


async def test_formation_checks_the_writers_right_again_in_the_worker(team, stub):
    """An episode stored without the right to act for the session's user (a
    row the edge did not check) forms no USER memory, even when a key that
    may act for the user asks for its extraction again."""
    project, session, _ = await alices_world(team, stub)
    remember(stub, PORTO, "The user lives in Porto.")
    decide_update(stub)
    episode = await team.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=PORTO),
        metadata=ALICE,
    )
    await formed(team, episode.id, ALICE)
    assert [c for _, c in await alices_memories(team, project.id)] == ["The user lives in Porto."]
    # The memory is put back, and the episode made to act for nobody.
    [(memory_id, _)] = await alices_memories(team, project.id)
    await team.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=memory_id, content="The user lives in Lisbon."),
            update_mask=FieldMask(paths=["content"]),
            user_id="alice",
        ),
        metadata=ALICE,
    )
    await team.app.db.write_sql(
        lambda c: c.execute("UPDATE episodes SET acts_for = '' WHERE id = ?", (episode.id,))
    )
    await team.graph.ExtractEpisode(
        graph_pb2.ExtractEpisodeRequest(episode_id=episode.id), metadata=ALICE
    )
    events = await formed(team, episode.id, ALICE, formations=2)
    last = [e for e in events if e.HasField("memory_formation")][-1]
    assert list(last.memory_formation.operations) == []
    assert [c for _, c in await alices_memories(team, project.id)] == ["The user lives in Lisbon."]
    got = await team.memory.GetEpisode(
        memory_pb2.GetEpisodeRequest(id=episode.id), metadata=ALICE
    )
    assert "could not act for the session's user" in got.memory_error
