"""A search's scores depend only on what its caller may read (issue 44, item 2).

Alice (tenant "a") searches her project's episodes, her memories in the
project and outside any project, and the project's entities, in keyword,
semantic and hybrid mode, asking each hit to explain itself. Then tenant "b"
writes the same rare word everywhere (episodes, PROJECT memories, USER
memories of its own user called "alice", more and newer than hers, entities
of that name), and carol, another user of alice's tenant, writes USER
memories with it; then both delete everything they wrote. After each step
every hit of every search is exactly what it was: its id, its score, its
order, every stage of its explanation.

On SQLite, FTS5's bm25 counted the word over the whole table, so one
tenant's rows lowered another's scores (security probe 5: any key learned in
two searches whether a word is anywhere on the server); and the common-words
sample of alice's memories read the 200 newest USER memories of any user
called alice, of every tenant, before keeping hers. The server is restarted
before each look, so that no cache keeps an earlier answer. Waiting for the
index is tests/search_explanations.py's ``indexed``, as for the honesty tests.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.search_explanations import indexed
from tests.support import Harness, bearer, start_harness

T = TypeVar("T")

# Every harness test here runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

ALICE_KEY, CAROL_KEY, OTHER_KEY = (
    "alice-tenant-a-key-00000001",
    "carol-tenant-a-key-00000001",
    "tenant-b-key-00000000000001",
)
ALICE, CAROL, OTHER = bearer(ALICE_KEY), bearer(CAROL_KEY), bearer(OTHER_KEY)
MODES = (
    memory_pb2.SEARCH_MODE_KEYWORD,
    memory_pb2.SEARCH_MODE_SEMANTIC,
    memory_pb2.SEARCH_MODE_HYBRID,
)
WORD = "kumquat"
# Every search asks for more hits than alice has rows: the test embedder gives
# many unrelated texts the same cosine (0), and which of equals fill the last
# places is the vector index's choice. Another tenant's rows must still take
# none of them.
LIMIT = 50
QUERIES = (f"{WORD} harbour", f"the user {WORD}", "harbour lantern", "Kumquat Lantern")
# Alice's texts: the probe word in a few, control words in others, and "user"
# on most of her memories (a common word of her scope, left out of queries).
EPISODES = (
    f"We shipped the {WORD} crates from the harbour",
    "The lantern festival is on Friday",
    f"Grandma's {WORD} jam recipe needs lemon",
    "The harbour master moved the ferry schedule",
    "Lunch at the noodle bar near the station",
)
THINGS = [
    "sailing", "jazz", "tennis", "pottery", "chess", "hiking", "baking", "poetry", "rowing",
    "opera", "cycling", "origami", "karate", "fishing", "gardening", "knitting", "skiing",
    "painting", "surfing", "climbing", "archery", "dancing", "running", "juggling", "fencing",
    "sculpture", "birding", "camping", "diving", "golf", "kayaking", "astronomy",
]  # fmt: skip
MEMORIES = [f"The user enjoys {thing}" for thing in THINGS] + [
    f"The user keeps {WORD} trees by the harbour",
    "The user lights a lantern every evening",
]
PROJECT_MEMORIES = (f"The {WORD} shipment docks at the harbour", "The lantern order is late")
ENTITIES = (("Kumquat Lantern", "project"), ("Harbour Office", "place"), ("Lemon", "concept"))


def key_file(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": ALICE_KEY, "name": "alice", "users": ["alice"], "tenant": "a"},
                    {"key": CAROL_KEY, "name": "carol", "users": ["carol"], "tenant": "a"},
                    # Another tenant, with a user of the same id.
                    {"key": OTHER_KEY, "name": "b", "users": ["alice", "bob"], "tenant": "b"},
                ]
            }
        )
    )
    return path


async def start(data: Path, keys: Path, store_settings: dict) -> Harness:
    return await start_harness(data, auth_keys_file=str(keys), **store_settings)


async def together(calls: Iterable[Callable[[], Awaitable[T]]]) -> list[T]:
    """The calls, a few at a time (a tenant writing in bulk): a gRPC call
    starts when it is made, so each is made once its turn comes."""
    gate = asyncio.Semaphore(8)

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await call()

    return await asyncio.gather(*(one(c) for c in calls))


def memory(kind, text: str, project_id: int = 0, user_id: str = "") -> memory_pb2.Memory:
    return memory_pb2.Memory(
        kind=kind, title=text[:24], content=text, tier=memory_pb2.TIER_LONGTERM,
        project_id=project_id, user_id=user_id,
    )  # fmt: skip


USER, PROJECT = memory_pb2.MEMORY_KIND_USER, memory_pb2.MEMORY_KIND_PROJECT


async def alices_world(h: Harness) -> int:
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="alice")), metadata=ALICE
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(project_id=project.id, user_id="alice")
        ),
        metadata=ALICE,
    )
    for text in EPISODES:
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id, user_message=text, ai_response="Noted."
            ),
            metadata=ALICE,
        )
    writes = [memory(USER, text, 0, "alice") for text in MEMORIES]
    writes += [memory(USER, text, project.id, "alice") for text in MEMORIES[-4:]]
    writes += [memory(PROJECT, text, project.id) for text in PROJECT_MEMORIES]
    for m in writes:
        await h.memory.CreateMemory(memory_pb2.CreateMemoryRequest(memory=m), metadata=ALICE)
    for name, etype in ENTITIES:
        await h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name=name, type=etype, project_id=project.id),
            metadata=ALICE,
        )
    await indexed(h)
    return project.id


Undo = Callable[[Harness], Awaitable[object]]


async def others_write(h: Harness, alice_project: int) -> list[Undo]:
    """Tenant b and carol write the word everywhere they can; returns the
    calls that delete it all again."""
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="alice")), metadata=OTHER
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(project_id=project.id, user_id="alice")
        ),
        metadata=OTHER,
    )
    undo: list[Undo] = []
    episodes = await together(
        lambda i=i: h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id,
                user_message=f"{WORD} {WORD} harbour note {i}",
                ai_response=f"{WORD} lantern",
            ),
            metadata=OTHER,
        )
        for i in range(40)
    )
    undo += [
        lambda h, i=e.id: h.memory.DeleteEpisode(
            memory_pb2.DeleteEpisodeRequest(id=i), metadata=OTHER
        )
        for e in episodes
    ]
    # More USER memories of b's "alice" than the common-words sample reads,
    # all newer than alice's, outside any project and in b's project.
    theirs = [memory(USER, f"{WORD} harbour {i} for the user", 0, "alice") for i in range(210)]
    theirs += [memory(USER, f"{WORD} lantern {i}", project.id, "alice") for i in range(20)]
    theirs += [memory(PROJECT, f"{WORD} shipment {i}", project.id) for i in range(20)]
    # Carol, of alice's tenant: USER memories, which alice may not read, in
    # alice's project and outside any.
    carols = [memory(USER, f"{WORD} harbour carol {i}", 0, "carol") for i in range(30)]
    carols += [memory(USER, f"The user {WORD} {i}", alice_project, "carol") for i in range(30)]
    for key, writes in ((OTHER, theirs), (CAROL, carols)):
        made = await together(
            lambda m=m, key=key: h.memory.CreateMemory(
                memory_pb2.CreateMemoryRequest(memory=m), metadata=key
            )
            for m in writes
        )
        undo += [
            lambda h, i=m.id, user=m.user_id, key=key: h.memory.DeleteMemory(
                memory_pb2.DeleteMemoryRequest(id=i, user_id=user), metadata=key
            )
            for m in made
        ]
    for name, etype in ENTITIES:
        entity = await h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name=name, type=etype, project_id=project.id),
            metadata=OTHER,
        )
        undo.append(
            lambda h, i=entity.id: h.graph.DeleteEntity(
                graph_pb2.DeleteEntityRequest(id=i), metadata=OTHER
            )
        )
    await indexed(h)
    return undo


def seen(hit, row) -> tuple:
    """What a hit says of its ranking: its row's id, score, paths and every
    stage of its explanation."""
    stages = tuple((s.stage, s.rank, s.score, s.note) for s in hit.explanation.stages)
    return (row.id, hit.score, tuple(getattr(hit, "sources", ())), stages)


async def look(h: Harness, project_id: int) -> dict:
    """Every search alice can make of her data, each hit explained."""
    out = {}
    for query in QUERIES:
        entities = h.graph.SearchEntities(
            graph_pb2.SearchEntitiesRequest(
                query=query, project_id=project_id, explain=True, limit=LIMIT
            ),
            metadata=ALICE,
        )
        out[(query, "entities")] = [seen(hit, hit.entity) async for hit in entities]
        for mode in MODES:
            episodes = h.memory.SearchEpisodes(
                memory_pb2.SearchEpisodesRequest(
                    query=query, project_id=project_id, mode=mode, explain=True, limit=LIMIT
                ),
                metadata=ALICE,
            )
            out[(query, mode, "episodes")] = [seen(hit, hit.episode) async for hit in episodes]
            for where, scope in (
                ("in the project", memory_pb2.MemoryScope(project_id=project_id, user_id="alice")),
                ("outside projects", memory_pb2.MemoryScope(user_id="alice")),
            ):
                memories = h.memory.SearchMemories(
                    memory_pb2.SearchMemoriesRequest(
                        query=query, mode=mode, explain=True, scope=scope, limit=LIMIT
                    ),
                    metadata=ALICE,
                )
                out[(query, mode, where)] = [seen(hit, hit.memory) async for hit in memories]
    return out


def differences(before: dict, after: dict) -> list:
    return [(key, before[key], after[key]) for key in before if before[key] != after[key]]


@pytest.mark.timeout(300)
async def test_other_tenants_and_users_change_no_score_order_or_explanation(
    tmp_path, store_settings
):
    keys, data = key_file(tmp_path / "keys.json"), tmp_path / "data"
    h = await start(data, keys, store_settings)
    try:
        project_id = await alices_world(h)
        await h.close()
        h = await start(data, keys, store_settings)
        before = await look(h, project_id)
        # The searches find what they should: the word, in every kind.
        assert all(before[(QUERIES[0], mode, "episodes")] for mode in MODES)
        assert all(before[(QUERIES[1], mode, "outside projects")] for mode in MODES)
        assert before[(QUERIES[-1], "entities")]

        undo = await others_write(h, project_id)
        await h.close()
        h = await start(data, keys, store_settings)
        assert differences(before, await look(h, project_id)) == []

        for call in undo:
            await call(h)
        await indexed(h)
        await h.close()
        h = await start(data, keys, store_settings)
        assert differences(before, await look(h, project_id)) == []
    finally:
        await h.close()
