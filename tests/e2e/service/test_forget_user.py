"""ForgetUser through the real server: a canary word for every path a user's
words take into the store (their episodes, an imported episode, a memory they
stored, memories formed from what they said, the graph extraction made of
it, a session summary and a project overview), for two users; one is
forgotten; then none of that user's words is in any table, and on SQLite in
no byte of any file of the data directory, while every word of the other
user is still there (docs/privacy.md); and ExportUser holds one user's words
only.

The erasure's rules on the same world, run step by step on the fakes (what
goes, what the receipt counts, the shared entity, a replayed request id, a
second request joining, a queued formation job cancelled), are
tests/unit/test_forget_user_erasure.py's; who may forget whom,
tests/unit/test_forget_rights.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.forgetting import EMPTY, World, every_text, files_of, tail
from tests.support import erasure_done

BOTH_STORES = True
STUB_DEFAULT_REPLY = EMPTY


@pytest.fixture
async def world(gh, stub) -> World:
    w = World(gh, stub, seed=45)
    await w.build()
    return w


async def test_a_forgotten_user_leaves_no_word_in_any_table_and_the_other_user_keeps_all(
    world: World, tmp_path, store_kind
):
    h = world.h
    alice, bob = world.words["alice"], world.words["bob"]
    before = await every_text(h)
    missing = [(u, p) for u, ws in world.words.items() for p, w in ws.items() if w not in before]
    assert not missing, f"never reached the store, so the test would prove nothing: {missing}"

    started = await h.memory.ForgetUser(memory_pb2.ForgetUserRequest(user_id="alice"))
    assert started.state == memory_pb2.ERASURE_STATE_RUNNING and started.user_id == "alice"
    assert started.planned.sessions == 1 and started.planned.episodes == 2
    receipt = await erasure_done(h, started.id)

    after = await every_text(h)
    left = [(path, word) for path, word in alice.items() if word in after]
    assert not left, f"alice's words are still in the store: {left}"
    # The overview drew on alice's episodes: it went, with bob's words in it.
    kept = {path: word for path, word in bob.items() if path != "summary"}
    gone = [(path, word) for path, word in kept.items() if word not in after]
    assert not gone, f"bob lost words: {gone}"
    assert "alice" not in after, "the user's id is still kept somewhere"

    c = receipt.counts
    assert (c.sessions, c.episodes) == (1, 2)
    # Her direct memory and the USER and PROJECT memories her episode formed.
    assert c.memories == 3
    assert c.entities == 1 and c.facts == 1 and c.evidence == 1
    assert c.summaries_removed >= 2  # her session's summary and the overview
    assert c.extraction_events >= 1 and c.formation_candidates >= 1
    # Her person's name goes; Lisbon, which bob's words name too, keeps its.
    assert c.aliases == 1 and c.mentions == 2
    assert receipt.end_time.seconds >= receipt.start_time.seconds
    text = str(receipt)
    assert not any(word in text for word in alice.values())

    # The shared entity stays, without her evidence; bob's fact is whole.
    lisbon = await h.graph.ListEntities(
        graph_pb2.ListEntitiesRequest(project_id=world.project, page_size=100)
    )
    names = {e.name for e in lisbon.entities}
    assert "Lisbon" in names and f"Person {bob['entity']}" in names
    assert f"Person {alice['entity']}" not in names

    if store_kind == "sqlite":
        data = Path(h.app.settings.data_dir)
        found = {
            (path, word)
            for name, blob in files_of(data).items()
            for path, word in alice.items()
            if tail(word) in blob
        }
        assert not found, f"alice's words are still on disk: {found}"
        everything = b"".join(files_of(data).values())
        assert all(tail(word) in everything for word in kept.values())
        assert b"alice" not in everything


async def test_export_user_holds_their_words_and_none_of_the_other_users(world: World):
    h = world.h
    records = [r async for r in h.memory.ExportUser(memory_pb2.ExportUserRequest(user_id="alice"))]
    text = "\n".join(str(r) for r in records)
    kinds = {r.WhichOneof("record") for r in records}
    assert {"session", "episode", "memory", "entity", "relationship_evidence"} <= kinds
    # Each mention of an entity in their episodes, not only the entity.
    assert "entity_episode" in kinds
    for path in ("episode", "reply", "imported", "memory", "formed_user", "entity"):
        assert world.words["alice"][path] in text, path
    assert not any(w in text for w in world.words["bob"].values())
