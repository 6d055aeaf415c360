"""What extraction writes to the graph for a given model answer
(domain/extraction.py), run as the extract worker runs it (``Extraction.run``,
then the write it returns) on the fakes of tests/fakes.py, with a scripted
model in-process (``ScriptedModel``): the prompt it builds (the episode and its
own graph's last 20 known entities), the entities, labels and edges it keeps,
mention counts and notes across episodes, a re-run that counts nothing twice,
an episode longer than the model's context in parts, and which model failures
wait rather than spend an attempt.

The whole-server tests (tests/e2e/service/test_extraction.py) keep the wiring:
the extract worker's retries, dead letters and waits for an absent model,
ExtractEpisode, the model client's own requests (options on the wire, a
server that does not say its context, a cut-off answer retried with more
room), and one graph per project or session as every read RPC shows it.
How names resolve: tests/unit/test_resolution_use_case.py."""

from __future__ import annotations

from typing import Any

from nexus_grpc.core.graph import SOURCE_EXTRACTION
from nexus_grpc.core.models import JobState
from nexus_grpc.core.records import EXTRACTION_DONE, ExtractionEvent
from nexus_grpc.llm import LLMUnavailable, LLMUnreachable, tokens
from nexus_grpc.workers.dependency_failures import failure_for
from nexus_grpc.workers.worker import Postpone
from tests.unit.extraction_world import World
from tests.unit.scripted_models import MODEL

ALICE: dict[str, Any] = {
    "entities": [
        {"name": "Alice", "type": "person", "notes": "Leads the Atlas project"},
        {"name": "Atlas", "type": "project", "notes": None},
    ],
    "relationships": [{"from": "Alice", "to": "Atlas", "label": "leads", "notes": None}],
}


def named(event: ExtractionEvent, name: str) -> dict[str, Any]:
    return next(e for e in event.payload["entities"] if e["name"] == name)


# The prompt ---------------------------------------------------------------------------


async def test_the_prompt_holds_the_episode_and_its_graphs_last_20_known_entities():
    w = World()
    p = w.project()
    for i in range(22):
        w.uow.graph.insert_entity((p, 0), f"Thing{i:02d}", "concept", None, source="manual")
    ep = w.episode(w.session(p), "Where does Alice work?", "Alice works at Initech.")
    event = await w.extract(ep)
    assert event.status == EXTRACTION_DONE
    [asked] = w.model.calls
    assert asked.model == MODEL
    assert (asked.temperature, asked.num_predict) == (0.1, 1500)
    assert set(asked.schema["required"]) == {"entities", "relationships"}
    assert "Where does Alice work?" in asked.prompt and "Alice works at Initech." in asked.prompt
    assert "Thing21 (concept)" in asked.prompt and "Thing02 (concept)" in asked.prompt
    assert "Thing01" not in asked.prompt and "Thing00" not in asked.prompt  # only the last 20


async def test_known_entities_of_other_projects_stay_out_of_the_prompt():
    w = World()
    p1, p2 = w.project("one"), w.project("two")
    w.uow.graph.insert_entity((p2, 0), "SecretThing", "concept", None, source="manual")
    await w.extract(w.episode(w.session(p1)))
    assert "SecretThing" not in w.model.calls[0].prompt


async def test_each_session_outside_a_project_has_its_own_entities_and_prompt():
    w = World()
    w.model.default = {
        "entities": [{"name": "Alice", "type": "person", "notes": "a private person"}],
        "relationships": [],
    }
    s1, s2 = w.session(), w.session()
    ev1 = await w.extract(w.episode(s1, "first session talk"))
    ev2 = await w.extract(w.episode(s2, "second session talk"))
    [a1], [a2] = ev1.payload["entities"], ev2.payload["entities"]
    assert a1["id"] != a2["id"]
    assert (a1["project_id"], a1["session_id"]) == (0, s1)
    assert (a2["project_id"], a2["session_id"]) == (0, s2)
    # Session 2's prompt did not list session 1's Alice as a known entity.
    second = next(c for c in w.model.calls if "second session" in c.prompt)
    assert "Alice (person)" not in second.prompt


async def test_the_same_names_in_two_projects_are_two_entities_each_with_its_own_notes():
    def about(where: str) -> dict[str, Any]:
        return {
            "entities": [
                {"name": "Alice", "type": "person", "notes": f"Works on {where}"},
                {"name": "Atlas", "type": "project", "notes": f"The {where} atlas"},
            ],
            "relationships": [{"from": "Alice", "to": "Atlas", "label": "leads", "notes": None}],
        }

    w = World()
    w.model.on("orion-episode", about("Orion"))
    w.model.on("vega-episode", about("Vega"))
    p1, p2 = w.project("one"), w.project("two")
    ev1 = await w.extract(w.episode(w.session(p1), "orion-episode"))
    ev2 = await w.extract(w.episode(w.session(p2), "vega-episode"))
    ids1 = {e["name"]: e["id"] for e in ev1.payload["entities"]}
    ids2 = {e["name"]: e["id"] for e in ev2.payload["entities"]}
    assert set(ids1) == set(ids2) == {"Alice", "Atlas"}
    assert not set(ids1.values()) & set(ids2.values())  # two entities per name/type
    for p, event, where in ((p1, ev1, "Orion"), (p2, ev2, "Vega")):
        own = {e["id"] for e in event.payload["entities"]}
        assert event.project_id == p
        assert all(e["project_id"] == p and where in e["notes"] for e in event.payload["entities"])
        assert all(e["mention_count"] == 1 for e in event.payload["entities"])
        [rel] = event.payload["relationships"]
        assert {rel["from_id"], rel["to_id"]} == own


# What gets kept -----------------------------------------------------------------------


async def test_types_outside_the_six_ignored_names_and_labels_are_filtered():
    w = World()
    w.model.default = {
        "entities": [
            {"name": "Alice", "type": "Person", "notes": "an engineer"},
            {"name": "Initech", "type": "organization", "notes": None},
            {"name": "Tuesday", "type": "date", "notes": None},
            {"name": "Thanks", "type": "concept", "notes": None},
            {"name": "hello", "type": "person", "notes": None},
        ],
        "relationships": [
            {"from": "Alice", "to": "Initech", "label": "Works At", "notes": "since 2020"},
            {"from": "Alice", "to": "Tuesday", "label": "met_on", "notes": None},
            {"from": "Thanks", "to": "Alice", "label": "x", "notes": None},
        ],
    }
    ep = w.episode(w.session())
    event = await w.extract(ep)
    assert event.status == EXTRACTION_DONE
    assert sorted((e["name"], e["type"]) for e in event.payload["entities"]) == [
        ("Alice", "person"),
        ("Initech", "organization"),
    ]
    assert [(r["label"], r["notes"]) for r in event.payload["relationships"]] == [
        ("works_at", "since 2020")
    ]
    listed = w.uow.graph.list_entities("", 0, None, 100)
    assert {e.name for e in listed} == {"Alice", "Initech"}
    alice = next(e for e in listed if e.name == "Alice")
    assert alice.source == SOURCE_EXTRACTION and alice.project_id == 0
    assert len([link for link in w.uow.graph.episode_links if link[1] == ep]) == 2
    assert w.uow.episodes.get(ep).extract_state == JobState.DONE


async def test_a_second_mention_counts_and_null_notes_keep_the_notes_before():
    w = World()
    w.model.queued = [
        ALICE,
        {
            "entities": [
                {"name": "Alice", "type": "person", "notes": None},
                {"name": "Atlas", "type": "project", "notes": "A mapping tool"},
            ],
            "relationships": [{"from": "Alice", "to": "Atlas", "label": "leads", "notes": None}],
        },
    ]
    p = w.project()
    s = w.session(p)
    e1 = await w.extract(w.episode(s))
    e2 = await w.extract(w.episode(s))
    alice1 = named(e1, "Alice")
    assert e2.id > e1.id and e2.project_id == p
    alice, atlas = named(e2, "Alice"), named(e2, "Atlas")
    assert alice["id"] == alice1["id"] and alice["mention_count"] == 2
    assert alice["notes"] == "Leads the Atlas project"  # kept: the new notes were null
    assert atlas["notes"] == "A mapping tool" and atlas["mention_count"] == 2
    assert alice["last_seen_at"] >= alice1["last_seen_at"]
    assert alice["project_id"] == p and atlas["project_id"] == p
    [rel] = e2.payload["relationships"]
    assert rel["mention_count"] == 2
    assert (rel["from_id"], rel["to_id"]) == (alice["id"], atlas["id"])


async def test_extracting_an_episode_again_counts_nothing_twice():
    w = World()
    w.model.default = ALICE
    ep = w.episode(w.session())
    first = await w.extract(ep)
    again = await w.extract(ep)
    assert again.id > first.id
    assert sorted(e["mention_count"] for e in again.payload["entities"]) == [1, 1]
    assert [r["mention_count"] for r in again.payload["relationships"]] == [1]
    assert len(w.model.calls) == 2


# Context --------------------------------------------------------------------------------


async def test_an_episode_longer_than_the_context_is_extracted_in_parts():
    w = World()
    w.model.context = 4096  # a ~9,000-byte exchange cannot fit one call
    w.model.on("part 1 of", ALICE)
    w.model.default = {
        "entities": [
            {"name": "Bob", "type": "person", "notes": None},
            {"name": "Atlas", "type": "project", "notes": "a search engine"},
        ],
        "relationships": [{"from": "Bob", "to": "Atlas", "label": "works_on", "notes": None}],
    }
    s = w.session()
    user = "Alice leads Atlas. " + "filler words here. " * 250
    ai = "Bob works on Atlas too. " + "more filler text. " * 250
    event = await w.extract(w.episode(s, user, ai))
    assert event.status == EXTRACTION_DONE
    calls = w.model.calls
    assert event.payload["parts"] == len(calls) >= 2
    # Every part fits the model whole: instructions, known list and all.
    for i, call in enumerate(calls, 1):
        assert tokens.estimate_messages(call.messages) + call.num_predict <= 4096
        assert f"part {i} of {len(calls)}" in call.prompt
        assert call.prompt.startswith("You build a knowledge graph")
    assert "Alice leads Atlas" in calls[0].prompt
    assert "Bob works on Atlas" in "".join(c.prompt for c in calls[1:])
    # Merged: each entity once, the first part's spelling, notes filled in.
    assert sorted((e["name"], e["type"]) for e in event.payload["entities"]) == [
        ("Alice", "person"),
        ("Atlas", "project"),
        ("Bob", "person"),
    ]
    assert sorted(r["label"] for r in event.payload["relationships"]) == ["leads", "works_on"]
    # A short one fits whole, and says so.
    assert (await w.extract(w.episode(s, "hi", "ok"))).payload["parts"] == 1


# Failures -------------------------------------------------------------------------------


def test_an_unreachable_model_waits_and_a_slow_or_failing_one_spends_an_attempt():
    def waits(exc: Exception) -> bool:
        return isinstance(failure_for(exc, "extraction"), Postpone)

    assert waits(LLMUnreachable("cannot reach Ollama at http://x: refused"))
    assert waits(LLMUnreachable("model 'q' is not available on Ollama at x (404)"))
    assert not waits(LLMUnavailable("Ollama (q) at x did not answer within 1.0s"))
    assert not waits(LLMUnavailable("Ollama (q) at x failed (HTTP 500): boom"))
