"""How the names of an extraction resolve, as the use case decides it
(domain/entity_resolution.py): the rules of domain/resolution_rules.py
(tests/unit/test_resolution.py) over what the graph holds, at most one model
question an episode for what they leave open, and a name kept apart, pending,
until the ``resolve:entity`` job asks again. Run as the workers run it on the
fakes of tests/fakes.py, with the scripted model of
tests/unit/scripted_models.py in-process (tests/unit/extraction_world.py).

The whole-server tests (tests/e2e/service/test_entity_resolution.py) keep the
wiring: the resolve:entity worker merging a pending name, any of a person's
names finding her through ListEntities and SearchEntities, and the store's
reads following the names in a large graph."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from nexus_grpc.core.graph import (
    MERGE_LLM,
    METHOD_CONTAINMENT,
    METHOD_LLM,
    METHOD_NEW,
    PENDING,
    RESOLVED,
)
from nexus_grpc.core.jobs import RESOLVE_ENTITY
from nexus_grpc.domain.entity_resolution import EntityResolution
from nexus_grpc.errors import NotFound
from nexus_grpc.llm import LLMUnavailable
from tests.fakes import FakeDatabase
from tests.unit.extraction_world import World
from tests.unit.scripted_models import MODEL

RESOLUTION_PROMPT = "Names and their candidates"


def answer(entities, relationships=(), ended=()) -> dict[str, Any]:
    return {
        "entities": [{"name": n, "type": t, "notes": notes} for n, t, notes in entities],
        "relationships": [
            {"from": a, "to": b, "label": label, "notes": None} for a, label, b in relationships
        ],
        "ended": [{"from": a, "to": b, "label": label} for a, label, b in ended],
    }


def choose(pick: str | None) -> Callable[[str], dict[str, Any]]:
    """Answer resolution questions like a careful model: the candidate whose
    line names ``pick`` (0 when None or absent)."""

    def respond(prompt: str) -> dict[str, Any]:
        numbers = [int(n) for n in re.findall(r"^(\d+)\. \"", prompt, re.MULTILINE)]
        found = re.search(rf"id (\d+): {re.escape(pick)} \(", prompt) if pick else None
        chosen = int(found.group(1)) if found else 0
        return {"answers": [{"name": n, "entity_id": chosen} for n in numbers]}

    return respond


def names_asked(w: World, how: Any) -> None:
    """How resolution questions are answered from now on (checked before the
    extraction's rules: a question quotes the exchange it came from)."""
    w.model.rules = [r for r in w.model.rules if r[0] != RESOLUTION_PROMPT]
    w.model.rules.insert(0, (RESOLUTION_PROMPT, how))


async def say(w: World, session_id: int, user: str, reply: dict[str, Any]):
    w.model.on(f"User message:\n{user}\n", reply)
    ep = w.episode(session_id, user, "Noted.")
    return ep, await w.extract(ep)


def in_graph(w: World, project_id: int):
    return w.uow.graph.list_entities("", project_id, None, 100)


# One person, many names ------------------------------------------------------------------


async def test_one_person_under_five_names_is_one_entity_with_every_alias():
    w = World()
    p = w.project()
    s = w.session(p)
    await say(w, s, "I met Priya Raman at Acme.", answer(
        [("Priya Raman", "person", "Engineer at Acme"), ("Acme", "organization", None)],
        [("Priya Raman", "works_at", "Acme")],
    ))  # fmt: skip
    _, event = await say(w, s, "Priya moved to Lisbon.", answer(
        [("Priya", "person", None), ("Lisbon", "place", None)], [("Priya", "lives_in", "Lisbon")]
    ))  # fmt: skip
    assert event.payload["llm_calls"] == 1  # settled by the rules: no question asked
    for user, name in (
        ("Dr. Raman gave a talk.", "Dr. Raman"),
        ("priya raman said hi.", "priya raman"),
        ("Priya's cat is called Miso.", "Priya's"),
    ):
        await say(w, s, user, answer([(name, "person", None)]))

    people = [e for e in in_graph(w, p) if e.type == "person"]
    assert len(people) == 1, people
    priya = people[0]
    assert priya.name == "Priya Raman"
    assert set(priya.aliases) >= {"Priya Raman", "Priya", "Raman"}
    assert priya.mention_count == 5
    aliases = w.uow.graph.list_aliases(priya.id, None, 100)
    methods = {a.name: a.method for a in aliases}
    assert methods["Priya Raman"] == METHOD_NEW
    assert methods["Priya"] == METHOD_CONTAINMENT
    assert methods["Raman"] == METHOD_CONTAINMENT
    assert all(a.episode_id for a in aliases)
    # Every fact is on the one entity.
    assert {r.label for r in w.uow.graph.list_relationships(priya.id, True)} == {
        "works_at",
        "lives_in",
    }
    # The next extraction prompt names her with her other names.
    await w.extract(w.episode(s, "Priya again", "ok"))
    assert "Priya Raman (person; also" in w.model.calls[-1].prompt


# A question for the model --------------------------------------------------------------


async def test_the_model_settles_which_alex_in_one_extra_call():
    w = World()
    p = w.project()
    s = w.session(p)
    await say(w, s, "Alex Kim and Alex Chen joined.", answer(
        [("Alex Kim", "person", "Designer"), ("Alex Chen", "person", "Data engineer")]
    ))  # fmt: skip
    names_asked(w, choose("Alex Chen"))
    _, event = await say(w, s, "Alex fixed the data pipeline.", answer(
        [("Alex", "person", "Fixed the pipeline")]
    ))  # fmt: skip
    assert event.payload["llm_calls"] == 2
    [question] = [c for c in w.model.calls if RESOLUTION_PROMPT in c.prompt]
    assert "Alex Kim (person)" in question.prompt and "Alex Chen (person)" in question.prompt
    assert "Alex fixed the data pipeline." in question.prompt  # the exchange it came from
    people = {e.name: e for e in in_graph(w, p)}
    assert set(people) == {"Alex Kim", "Alex Chen"}
    assert "Alex" in people["Alex Chen"].aliases and "Alex" not in people["Alex Kim"].aliases
    methods = {a.name: a.method for a in w.uow.graph.list_aliases(people["Alex Chen"].id, None, 9)}
    assert methods["Alex"] == METHOD_LLM


async def test_an_unanswered_question_keeps_the_name_apart_pending_until_asked_again():
    w = World()
    p = w.project()
    s = w.session(p)
    await say(w, s, "Alex Kim and Alex Chen joined.", answer(
        [("Alex Kim", "person", None), ("Alex Chen", "person", None)]
    ))  # fmt: skip
    names_asked(w, LLMUnavailable("Ollama (q) at x failed (HTTP 500): runner crashed"))
    _, event = await say(w, s, "Alex reviewed my slides.", answer([("Alex", "person", None)]))
    # No merge on a guess: a third entity, marked pending, with its job queued...
    [alex] = [e for e in event.payload["entities"] if e["name"] == "Alex"]
    assert alex["resolution"] == PENDING
    assert alex["id"] in w.uow.jobs.pending(RESOLVE_ENTITY)
    # ...until the resolve job asks again and merges it into the answer.
    names_asked(w, choose("Alex Kim"))
    resolution = EntityResolution(
        FakeDatabase(w.uow),  # type: ignore[arg-type]
        w.model,  # type: ignore[arg-type]
        model=MODEL,
        timeout=5.0,
    )
    write = await resolution.resolve_pending(alex["id"])
    assert write is not None
    write(w.uow)
    assert {e.name for e in in_graph(w, p)} == {"Alex Kim", "Alex Chen"}
    with pytest.raises(NotFound):
        w.uow.graph.get_entity(alex["id"])
    [merge] = w.uow.graph.list_merges((p, 0), 0, None, 10, None)
    assert merge.method == MERGE_LLM and list(merge.source_ids) == [alex["id"]]
    kim = next(e for e in in_graph(w, p) if e.name == "Alex Kim")
    assert merge.target_id == kim.id and "Alex" in kim.aliases and kim.resolution == RESOLVED


# Names that stay apart -------------------------------------------------------------------


async def test_jordan_the_person_and_jordan_the_place_stay_two_and_labels_pick_the_ends():
    w = World()
    p = w.project()
    await say(w, w.session(p), "Jordan flew to Jordan and saw Amman.", answer(
        [("Jordan", "person", None), ("Jordan", "place", None), ("Amman", "place", None)],
        [("Jordan", "travelled_to", "Jordan"), ("Amman", "located_in", "Jordan")],
    ))  # fmt: skip
    e = {(x.name, x.type): x for x in in_graph(w, p)}
    assert sorted(e) == [("Amman", "place"), ("Jordan", "person"), ("Jordan", "place")]
    person, place = e[("Jordan", "person")].id, e[("Jordan", "place")].id
    # Edge ends are names; the label says which Jordan each one is.
    [trip] = w.uow.graph.list_relationships(person, False)
    assert (trip.to_id, trip.label) == (place, "travelled_to")
    [where] = w.uow.graph.list_relationships(e[("Amman", "place")].id, False)
    assert where.to_id == place


async def test_graphs_never_resolve_into_each_other():
    w = World()
    p1, p2 = w.project("one"), w.project("two")
    w.uow.graph.insert_entity((p1, 0), "Priya Raman", "person", None, source="manual")
    await say(w, w.session(p2), "Priya said hello.", answer([("Priya", "person", None)]))
    [only] = in_graph(w, p2)
    assert only.name == "Priya" and only.project_id == p2
    assert not any(RESOLUTION_PROMPT in c.prompt for c in w.model.calls)
