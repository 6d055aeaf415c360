"""Facts with time (intervals, single-valued labels, ends, late imports, as_of)
and merging entities by hand, through the real server and the Ollama
stand-in. The rules of manual facts and of merges are decided on the unit
tier's fakes (tests/unit/test_graph_relationships.py, tests/unit/test_merges.py);
here each RPC keeps its wiring, and extraction's facts their whole path."""

from __future__ import annotations

import grpc
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.graph_support import (
    EMPTY,
    answer,
    entities_of,
    event_for,
    expect_status,
    new_project,
    new_session,
    say,
    script,
)
from tests.support import Harness

BOTH_STORES = True
STUB_DEFAULT_REPLY = EMPTY
INVALID = grpc.StatusCode.INVALID_ARGUMENT
FAILED = grpc.StatusCode.FAILED_PRECONDITION

MARCH, APRIL, JUNE, JANUARY = 1_709_251_200, 1_711_929_600, 1_717_200_000, 1_704_067_200


def ts(seconds: int) -> Timestamp:
    return Timestamp(seconds=seconds)


async def by_name(h: Harness, project_id: int) -> dict[str, graph_pb2.Entity]:
    return {e.name: e for e in await entities_of(h, project_id)}


async def relationships(h: Harness, entity_id: int, **kw) -> list[graph_pb2.Relationship]:
    return list(
        (
            await h.graph.ListRelationships(
                graph_pb2.ListRelationshipsRequest(entity_id=entity_id, **kw)
            )
        ).relationships
    )


async def test_a_move_ends_the_previous_home_and_as_of_shows_either(gh, stub):
    p = await new_project(gh)
    s = await new_session(gh, p.id)
    first, _ = await say(gh, stub, s.id, "Priya lives in Lisbon.", answer(
        [("Priya", "person", None), ("Lisbon", "place", None)], [("Priya", "lives_in", "Lisbon")]
    ), occur_time=ts(MARCH))  # fmt: skip
    # "moved_to" is the model's label for a move: it is where she lives from then on.
    second, _ = await say(gh, stub, s.id, "Priya moved to Porto.", answer(
        [("Priya", "person", None), ("Porto", "place", None)], [("Priya", "moved_to", "Porto")]
    ), occur_time=ts(JUNE))  # fmt: skip
    e = await by_name(gh, p.id)
    priya, lisbon, porto = e["Priya"].id, e["Lisbon"].id, e["Porto"].id

    [now] = await relationships(gh, priya)
    assert (now.to_id, now.label) == (porto, "lives_in")
    assert now.valid_time.seconds == JUNE and not now.HasField("invalid_time")
    assert now.asserted_episode_id == second.id and now.ended_episode_id == 0

    [then] = await relationships(gh, priya, as_of=ts(APRIL))
    assert then.to_id == lisbon
    # After the first home ended: only the second holds, the first is not read
    # as still current.
    [later] = await relationships(gh, priya, as_of=ts(JUNE + 86_400))
    assert later.to_id == porto
    history = await relationships(gh, priya, include_history=True)
    assert [(r.to_id, r.valid_time.seconds, r.invalid_time.seconds) for r in history] == [
        (lisbon, MARCH, JUNE),
        (porto, JUNE, 0),
    ]
    assert history[0].ended_episode_id == second.id
    assert history[0].asserted_episode_id == first.id
    # The walk follows what holds (now, or then).
    hood = await gh.graph.GetNeighborhood(graph_pb2.GetNeighborhoodRequest(entity_id=priya))
    assert {n.id for n in hood.nodes} == {priya, porto}
    hood = await gh.graph.GetNeighborhood(
        graph_pb2.GetNeighborhoodRequest(entity_id=priya, as_of=ts(APRIL))
    )
    assert {n.id for n in hood.nodes} == {priya, lisbon}
    hood = await gh.graph.GetNeighborhood(
        graph_pb2.GetNeighborhoodRequest(entity_id=priya, as_of=ts(JUNE + 86_400))
    )
    assert {n.id for n in hood.nodes} == {priya, porto}
    both = await gh.graph.GetNeighbors(
        graph_pb2.GetNeighborsRequest(entity_ids=[priya], include_history=True)
    )
    assert {n.id for n in both.nodes} == {priya, lisbon, porto} and len(both.edges) == 2


async def test_an_episode_says_which_current_fact_it_ends(gh, stub):
    p = await new_project(gh)
    s = await new_session(gh, p.id)
    await say(gh, stub, s.id, "Priya works at Acme.", answer(
        [("Priya", "person", None), ("Acme", "organization", None)],
        [("Priya", "works_at", "Acme")],
    ), occur_time=ts(MARCH))  # fmt: skip
    left, _ = await say(gh, stub, s.id, "Priya left Acme last week.", answer(
        [("Priya", "person", None)], ended=[("Priya", "works_at", "Acme")]
    ), occur_time=ts(JUNE))  # fmt: skip
    # The model was shown what holds about the entities the exchange names.
    prompt = next(
        r.prompt_text()
        for r in stub.requests_to("/api/chat")
        if "Priya left Acme last week." in r.prompt_text()
    )
    assert "Current facts about entities named here:" in prompt
    assert "- Priya works_at Acme (since 2024-03-01)" in prompt
    e = await by_name(gh, p.id)
    assert await relationships(gh, e["Priya"].id) == []
    [ended] = await relationships(gh, e["Priya"].id, include_history=True)
    assert ended.invalid_time.seconds == JUNE and ended.ended_episode_id == left.id


async def test_a_late_import_enters_as_history_and_ends_nothing_after_it(gh, stub):
    p = await new_project(gh)
    s = await new_session(gh, p.id)
    await say(gh, stub, s.id, "Priya lives in Lisbon.", answer(
        [("Priya", "person", None), ("Lisbon", "place", None)], [("Priya", "lives_in", "Lisbon")]
    ), occur_time=ts(MARCH))  # fmt: skip
    # An exchange from January, imported after March's.
    script(stub, "Back then Priya lived in Berlin.", answer(
        [("Priya", "person", None), ("Berlin", "place", None)], [("Priya", "lives_in", "Berlin")]
    ))  # fmt: skip

    async def one():
        yield memory_pb2.ImportEpisodesRequest(
            episode=memory_pb2.CreateEpisodeRequest(
                session_id=s.id,
                user_message="Back then Priya lived in Berlin.",
                ai_response="Noted.",
                request_id="late-1",
                occur_time=ts(JANUARY),
            )
        )

    done = await gh.memory.ImportEpisodes(one())
    [late_id] = done.episode_ids
    assert (await event_for(gh, late_id)).status == graph_pb2.EXTRACTION_STATUS_DONE
    e = await by_name(gh, p.id)
    [now] = await relationships(gh, e["Priya"].id)
    assert now.to_id == e["Lisbon"].id and not now.HasField("invalid_time")
    history = await relationships(gh, e["Priya"].id, include_history=True)
    assert sorted((r.valid_time.seconds, r.to_id, r.invalid_time.seconds) for r in history) == [
        (JANUARY, e["Berlin"].id, MARCH),
        (MARCH, e["Lisbon"].id, 0),
    ]


async def test_a_project_sets_which_labels_hold_one_value(gh):
    p = await new_project(gh)
    assert list(p.single_valued_labels) == []  # the defaults
    updated = await gh.memory.UpdateProject(
        memory_pb2.UpdateProjectRequest(
            project=memory_pb2.Project(id=p.id, single_valued_labels=["lives_in", "owns"]),
            update_mask=FieldMask(paths=["single_valued_labels"]),
        )
    )
    assert list(updated.single_valued_labels) == ["lives_in", "owns"]

    await expect_status(
        gh.memory.UpdateProject(
            memory_pb2.UpdateProjectRequest(
                project=memory_pb2.Project(id=p.id, single_valued_labels=["Lives In"]),
                update_mask=FieldMask(paths=["single_valued_labels"]),
            )
        ),
        INVALID,
        "'lives_in'",
    )
    reset = await gh.memory.UpdateProject(
        memory_pb2.UpdateProjectRequest(
            project=memory_pb2.Project(id=p.id),
            update_mask=FieldMask(paths=["single_valued_labels"]),
        )
    )
    assert list(reset.single_valued_labels) == []


async def test_a_manual_fact_with_an_end_and_a_read_of_two_times_refused(gh):
    p = await new_project(gh)
    a = await gh.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="Priya", type="person", project_id=p.id)
    )
    b = await gh.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="Acme", type="organization", project_id=p.id)
    )
    r = await gh.graph.UpsertRelationship(
        graph_pb2.UpsertRelationshipRequest(
            from_id=a.id, to_id=b.id, label="works_at", valid_time=ts(MARCH),
            invalid_time=ts(JUNE),
        )
    )  # fmt: skip
    assert (r.valid_time.seconds, r.invalid_time.seconds) == (MARCH, JUNE)
    assert await relationships(gh, a.id) == []
    await expect_status(
        gh.graph.ListRelationships(
            graph_pb2.ListRelationshipsRequest(
                entity_id=a.id, as_of=ts(MARCH), include_history=True
            )
        ),
        INVALID,
        "not both",
    )


# Merging ------------------------------------------------------------------------


async def test_a_merge_folds_facts_links_and_aliases_and_undo_restores_them(gh, stub):
    p = await new_project(gh)
    s = await new_session(gh, p.id)
    # Two names extraction could not tie together: "Bob" and "Robert Smith".
    # Bob alone works at Acme: the undo must take that fact back from Robert.
    await say(gh, stub, s.id, "Bob uses Vim, works at Acme and lives in Lisbon.", answer(
        [("Bob", "person", "Likes Vim"), ("Vim", "technology", None),
         ("Lisbon", "place", None), ("Acme", "organization", None)],
        [("Bob", "uses", "Vim"), ("Bob", "lives_in", "Lisbon"), ("Bob", "works_at", "Acme")],
    ), occur_time=ts(MARCH))  # fmt: skip
    await say(gh, stub, s.id, "Robert Smith uses Vim, knows Bob, lives in Porto.", answer(
        [("Robert Smith", "person", None), ("Vim", "technology", None),
         ("Bob", "person", None), ("Porto", "place", None)],
        [("Robert Smith", "uses", "Vim"), ("Robert Smith", "knows", "Bob"),
         ("Robert Smith", "lives_in", "Porto")],
    ), occur_time=ts(JUNE))  # fmt: skip
    e = await by_name(gh, p.id)
    robert, bob = e["Robert Smith"], e["Bob"]
    before_robert = await relationships(gh, robert.id, include_history=True)
    before_bob = await relationships(gh, bob.id, include_history=True)

    merge = await gh.graph.MergeEntities(
        graph_pb2.MergeEntitiesRequest(
            target_id=robert.id, source_ids=[bob.id], request_id="m-1", reason="same person"
        )
    )
    assert merge.method == graph_pb2.MERGE_METHOD_MANUAL and list(merge.source_ids) == [bob.id]
    await expect_status(
        gh.graph.GetEntity(graph_pb2.GetEntityRequest(id=bob.id)), grpc.StatusCode.NOT_FOUND
    )
    merged = await gh.graph.GetEntity(graph_pb2.GetEntityRequest(id=robert.id))
    assert set(merged.aliases) == {"Robert Smith", "Bob"}
    assert merged.mention_count == 3 and merged.notes == "Likes Vim"
    facts = await relationships(gh, robert.id, include_history=True)
    # "uses Vim" twice became one with both mentions; "knows Bob" became a
    # self-loop and went; Lisbon (March) is ended by Porto (June).
    uses = [r for r in facts if r.label == "uses"]
    assert len(uses) == 1 and uses[0].mention_count == 2
    assert not any(r.label == "knows" for r in facts)
    homes = sorted((r.to_id, r.invalid_time.seconds) for r in facts if r.label == "lives_in")
    assert homes == sorted([(e["Lisbon"].id, JUNE), (e["Porto"].id, 0)])
    assert [r.to_id for r in facts if r.label == "works_at"] == [e["Acme"].id]
    # The same request again answers with the same merge.
    again = await gh.graph.MergeEntities(
        graph_pb2.MergeEntitiesRequest(target_id=robert.id, source_ids=[bob.id], request_id="m-1")
    )
    assert again.id == merge.id
    listed = await gh.graph.ListMerges(graph_pb2.ListMergesRequest(entity_id=robert.id))
    assert [m.id for m in listed.merges] == [merge.id]

    undone = await gh.graph.UndoMerge(graph_pb2.UndoMergeRequest(merge_id=merge.id))
    assert undone.HasField("undo_time")
    back = await gh.graph.GetEntity(graph_pb2.GetEntityRequest(id=bob.id))
    assert back.name == "Bob" and back.mention_count == bob.mention_count
    assert list(back.aliases) == ["Bob"]
    robert_now = await gh.graph.GetEntity(graph_pb2.GetEntityRequest(id=robert.id))
    assert robert_now.mention_count == robert.mention_count
    assert set(robert_now.aliases) == {"Robert Smith"}

    def shape(rels):
        return sorted(
            (r.from_id, r.to_id, r.label, r.mention_count, r.valid_time.seconds,
             r.invalid_time.seconds)
            for r in rels
        )  # fmt: skip

    assert shape(await relationships(gh, robert.id, include_history=True)) == shape(before_robert)
    assert shape(await relationships(gh, bob.id, include_history=True)) == shape(before_bob)
    await expect_status(
        gh.graph.UndoMerge(graph_pb2.UndoMergeRequest(merge_id=merge.id)), FAILED, "already"
    )


async def test_refused_merges_answer_their_status_codes_and_write_nothing(gh):
    p1 = await new_project(gh, "one")

    async def upsert(name, etype, project_id):
        return await gh.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name=name, type=etype, project_id=project_id)
        )

    jordan = await upsert("Jordan", "person", p1.id)
    country = await upsert("Jordan", "place", p1.id)
    await expect_status(
        gh.graph.MergeEntities(
            graph_pb2.MergeEntitiesRequest(target_id=jordan.id, source_ids=[country.id])
        ),
        INVALID,
        "never merge",
    )
    await expect_status(
        gh.graph.MergeEntities(
            graph_pb2.MergeEntitiesRequest(target_id=jordan.id, source_ids=[999_999])
        ),
        grpc.StatusCode.NOT_FOUND,
        "999999",
    )
    await expect_status(
        gh.graph.UndoMerge(graph_pb2.UndoMergeRequest(merge_id=0)), INVALID, "merge_id"
    )
    await expect_status(
        gh.graph.ListMerges(graph_pb2.ListMergesRequest(project_id=p1.id, entity_id=jordan.id)),
        INVALID,
        "exactly one",
    )
    await expect_status(
        gh.graph.UndoMerge(graph_pb2.UndoMergeRequest(merge_id=999)),
        grpc.StatusCode.NOT_FOUND,
        "999",
    )
    # Nothing was written by any refusal.
    assert len(await entities_of(gh, p1.id)) == 2
