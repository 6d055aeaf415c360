"""Entity resolution through the real server, with the Ollama stand-in answering
extraction and resolution questions: the wiring of resolution inside the
extract worker (a resolved name's aliases, ListEntities and SearchEntities
finding it), of the resolve:entity worker (a pending name merged once the
model answers), and the store's reads following the names in a large graph.

The cascade's rules on their own: tests/unit/test_resolution.py; the use case
on the fakes with a scripted model (one person under five names, which Alex
the model picks, a name kept apart pending, Jordan the person and the place,
graphs that never resolve into each other): tests/unit/test_resolution_use_case.py."""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace

import grpc

from nexus_grpc.domain.resolution_rules import BLOCK_LIMIT, Match, Mention, Unsure
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from tests.graph_support import (
    EMPTY,
    answer,
    entities_of,
    expect_status,
    new_project,
    new_session,
    say,
)
from tests.ollama_stub import Reply
from tests.support import wait_until

BOTH_STORES = True
STUB_DEFAULT_REPLY = EMPTY
RESOLUTION_PROMPT = "Names and their candidates"


# Through the server ---------------------------------------------------------------


def choose(stub, pick: str | None) -> None:
    """Answer resolution questions like a careful model: the candidate whose
    line names ``pick`` (0 when None or absent)."""

    def respond(endpoint: str, body: dict) -> Reply | None:
        text = json.dumps(body)
        if RESOLUTION_PROMPT not in text:
            return None
        prompt = "\n".join(m["content"] for m in body.get("messages", []))
        numbers = [int(n) for n in re.findall(r"^(\d+)\. \"", prompt, re.MULTILINE)]
        found = re.search(rf"id (\d+): {re.escape(pick)} \(", prompt) if pick else None
        chosen = int(found.group(1)) if found else 0
        return Reply.of({"answers": [{"name": n, "entity_id": chosen} for n in numbers]})

    stub.responder = respond


async def test_a_persons_second_name_joins_her_and_finds_her(gh, stub):
    """An extraction's name resolved through the server: her entity's
    aliases (ListEntityAliases), and her other name finding her through
    ListEntities and SearchEntities. The cascade itself (five names, one
    entity) is tests/unit/test_resolution_use_case.py's."""
    p = await new_project(gh)
    s = await new_session(gh, p.id)
    await say(gh, stub, s.id, "I met Priya Raman at Acme.", answer(
        [("Priya Raman", "person", "Engineer at Acme"), ("Acme", "organization", None)],
        [("Priya Raman", "works_at", "Acme")],
    ))  # fmt: skip
    _, event = await say(gh, stub, s.id, "Dr. Raman gave a talk.", answer(
        [("Dr. Raman", "person", None)]
    ))  # fmt: skip
    assert event.llm_calls == 1  # settled by the rules: no question asked
    [priya] = [e for e in await entities_of(gh, p.id) if e.type == "person"]
    assert priya.name == "Priya Raman" and priya.mention_count == 2
    assert set(priya.aliases) >= {"Priya Raman", "Raman"}
    aliases = (
        await gh.graph.ListEntityAliases(graph_pb2.ListEntityAliasesRequest(entity_id=priya.id))
    ).aliases
    methods = {a.name: a.method for a in aliases}
    assert methods["Priya Raman"] == graph_pb2.RESOLUTION_METHOD_NEW
    assert methods["Raman"] == graph_pb2.RESOLUTION_METHOD_CONTAINMENT
    assert all(a.episode_id for a in aliases)
    found = await gh.graph.ListEntities(
        graph_pb2.ListEntitiesRequest(project_id=p.id, name="dr raman")
    )
    assert [e.id for e in found.entities] == [priya.id]
    hits = [
        h async for h in gh.graph.SearchEntities(
            graph_pb2.SearchEntitiesRequest(project_id=p.id, query="what about Dr Raman?")
        )
    ]  # fmt: skip
    assert hits and hits[0].entity.id == priya.id


async def test_an_unanswered_question_keeps_the_name_apart_until_asked_again(gh, stub):
    p = await new_project(gh)
    s = await new_session(gh, p.id)
    await say(gh, stub, s.id, "Alex Kim and Alex Chen joined.", answer(
        [("Alex Kim", "person", None), ("Alex Chen", "person", None)]
    ))  # fmt: skip
    stub.add_rule(Reply.error_status(500, "runner crashed"), contains=RESOLUTION_PROMPT, times=1)
    _, event = await say(gh, stub, s.id, "Alex reviewed my slides.", answer(
        [("Alex", "person", None)]
    ))  # fmt: skip
    # No merge on a guess: a third entity, marked pending...
    [alex] = [e for e in event.entities if e.name == "Alex"]
    assert alex.resolution_pending
    # ...until the resolve job asks again and merges it into the answer.
    resolver = next(w for w in gh.app.workers if w.kind == "resolve:entity")
    resolver.config = replace(resolver.config, backoff_base=0.02, backoff_max=0.1)
    choose(stub, "Alex Kim")
    gh.app.signals.wake("resolve:entity")

    async def merged() -> bool:
        names = {e.name for e in await entities_of(gh, p.id)}
        return names == {"Alex Kim", "Alex Chen"}

    await wait_until(merged, timeout=20)
    await expect_status(
        gh.graph.GetEntity(graph_pb2.GetEntityRequest(id=alex.id)), grpc.StatusCode.NOT_FOUND
    )
    [merge] = (await gh.graph.ListMerges(graph_pb2.ListMergesRequest(project_id=p.id))).merges
    assert merge.method == graph_pb2.MERGE_METHOD_LLM and list(merge.source_ids) == [alex.id]
    kim = next(e for e in await entities_of(gh, p.id) if e.name == "Alex Kim")
    assert merge.target_id == kim.id and "Alex" in kim.aliases and not kim.resolution_pending


async def test_resolution_reads_only_its_candidates_in_a_large_graph(gh, stub):
    """The cascade's reads follow the names, not the graph: 2,000 entities,
    and a name resolves from the few its key, words and prefixes reach."""
    from nexus_grpc.domain.entity_resolution import resolver_for
    from nexus_grpc.store import graph as graph_store

    p = await new_project(gh)
    rng = random.Random(7)
    syllables = "ka ri mo la ne su to vi ra en dor mil pa be sha lo ti qu an ze ro fa".split()
    surnames: list[str] = []
    while len(surnames) < 2000:
        name = "".join(rng.choice(syllables) for _ in range(4)).capitalize()
        if name not in surnames:
            surnames.append(name)

    def fill(conn) -> None:
        for i, surname in enumerate(surnames):
            graph_store.GraphRows(conn).insert_entity(
                (p.id, 0), f"Person{i:04d} {surname}", "person", None, source="manual"
            )

    await gh.app.db.write_sql(fill)
    known = surnames[1234]
    typo = known[:-1] + ("x" if known[-1] != "x" else "y")
    mentions = [Mention(known, "person"), Mention(typo, "person")]
    reads: list[int] = []

    def decide(uow):
        resolver = resolver_for(uow, (p.id, 0), mentions)
        reads.append(len(resolver._rows))
        exact = resolver.decide(mentions[0])
        reads.append(len(resolver._rows))
        near = resolver.decide(mentions[1])  # a typo: its prefix block is read now
        reads.append(len(resolver._rows))
        return exact, near

    exact, near = await gh.app.db.read(decide)
    assert isinstance(exact, Match)
    assert isinstance(near, Unsure) and exact.entity_id in near.candidates
    # Two names read a handful of the 2,000: their keys' and words' matches,
    # then one prefix block (at most BLOCK_LIMIT).
    assert reads[0] == reads[1] == 1 and reads[2] <= 1 + BLOCK_LIMIT
