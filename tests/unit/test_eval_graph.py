"""``nexus-grpc eval graph`` without a server: its arithmetic (B-cubed,
duplicates, false merges, facts compared as sets, a mention located by its
surface) on cases worked out by hand, its set format's checks on the committed
dev set (bench/eval/graph-dev.json) and the command's refusal of a bad set
before it dials, and the careful stand-in (tests/careful_model.py) answering
the service's own resolution and extraction prompts from the set's gold.

The dev set through a real server, a server that cannot extract and a name
the LLM settles later stay whole-server, in tests/e2e/service/test_graph_eval.py."""

from __future__ import annotations

import json

import pytest

from nexus_grpc.cli import main as cli_main
from nexus_grpc.evaluation import graph_score as score
from nexus_grpc.evaluation.graph_set import ENTITY_TYPES, DataError, load
from nexus_grpc.llm.extraction_prompts import ENTITY_TYPES as SERVICE_TYPES
from nexus_grpc.llm.resolution_prompts import Candidate, Question, build_resolution_messages
from tests.careful_model import CarefulModel
from tests.unit.graph_dev_set import DEV_SET, changed_dev_set

# The arithmetic ---------------------------------------------------------------------


def test_bcubed_duplicates_and_false_merges_on_clusters_worked_by_hand():
    # Gold: A = {a1, a2, a3}, B = {b1, b2}. The service kept X = {a1, a2},
    # Y = {a3, b1} (a false merge), Z = {b2}; "lost" was never kept.
    gold = {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "b2": "B", "lost": "B"}
    kept = {"a1": "X", "a2": "X", "a3": "Y", "b1": "Y", "b2": "Z"}
    b3 = score.bcubed(gold, kept)
    # Precision per item: a1 1, a2 1, a3 1/2, b1 1/2, b2 1 -> 4/5.
    # Recall per item (over kept items): a1 2/3, a2 2/3, a3 1/3, b1 1/2, b2 1/2 -> 8/15.
    assert b3.items == 5
    assert b3.precision == pytest.approx(4 / 5)
    assert b3.recall == pytest.approx(8 / 15)
    assert b3.f1 == pytest.approx(2 * (4 / 5) * (8 / 15) / (4 / 5 + 8 / 15))
    assert score.duplicate_entities(gold, kept) == 2  # A in X and Y, B in Y and Z
    assert score.false_merges(gold, kept) == 1  # Y holds A and B
    assert score.split_clusters(gold, kept) == {"A": {"X", "Y"}, "B": {"Y", "Z"}}
    assert score.merged_entities(gold, kept) == {"Y": {"A", "B"}}
    assert score.majority(gold, kept) == {"X": "A", "Y": "A", "Z": "B"}  # Y: a tie, first key

    perfect = score.bcubed(gold, {i: c.lower() for i, c in gold.items()})
    assert (perfect.precision, perfect.recall, perfect.f1) == (1.0, 1.0, 1.0)
    lumped = score.bcubed(gold, dict.fromkeys(gold, "all"))
    assert lumped.recall == 1.0 and lumped.precision == pytest.approx((3 * 3 + 3 * 3) / 36)


def test_facts_compare_as_sets_per_subject_and_label_on_either_side():
    expected = {("priya", "lives_in"): {"porto"}, ("atlas", "uses"): {"postgresql"}}
    actual = {("priya", "lives_in"): {"porto", "lisbon"}, ("alex", "works_at"): {"globex"}}
    correct, groups, wrong = score.compare_groups(expected, actual)
    assert (correct, groups) == (0, 3)
    assert [(w.subject, w.label, w.expected, w.actual) for w in wrong] == [
        ("alex", "works_at", (), ("globex",)),
        ("atlas", "uses", ("postgresql",), ()),
        ("priya", "lives_in", ("porto",), ("lisbon", "porto")),
    ]
    assert score.compare_groups(expected, expected)[:2] == (2, 2)


def test_a_mention_is_found_by_its_surface_among_its_episodes_entities():
    seen = [
        score.SeenEntity(1, "Priya Raman", "person", ("Priya Raman", "Raman", "Priya")),
        score.SeenEntity(2, "Jordan", "person", ("Jordan",)),
        score.SeenEntity(3, "Jordan", "place", ("Jordan",)),
        score.SeenEntity(4, "São Paulo", "place", ("São Paulo",)),
    ]
    assert score.locate("Dr. Raman", "person", seen) == (1, score.FOUND)
    assert score.locate("PRIYA  RAMAN's", "person", seen) == (1, score.FOUND)
    assert score.locate("Sao Paulo", "place", seen) == (4, score.FOUND)
    assert score.locate("Jordan", "place", seen) == (3, score.FOUND)
    assert score.locate("Jordan", "person", seen) == (2, score.FOUND)
    assert score.locate("Lisbon", "place", seen) == (None, score.MISSING)
    twins = [score.SeenEntity(5, "Alex Kim", "person", ("Alex",)), seen[1]]
    twins.append(score.SeenEntity(6, "Alex Chen", "person", ("Alex",)))
    assert score.locate("Alex", "person", twins) == (None, score.AMBIGUOUS)
    # Merges are followed to the entity that holds the mention now.
    assert score.follow(7, {7: 5, 5: 9}) == 9 and score.follow(3, {7: 5}) == 3


# The set format -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "place", "problem"),
    [
        (
            lambda d: d["projects"][0]["sessions"][1]["episodes"][2]["extraction"]["entities"][
                0
            ].update({"is": "alex"}),
            "projects[0].sessions[1].episodes[2].extraction.entities[0].is",
            "'alex' is not a key of projects[0].expected.entities",
        ),
        (
            lambda d: d["projects"][1]["sessions"][0]["episodes"][0].update(
                {"occur_time": "2024-01-15 19:00"}
            ),
            "projects[1].sessions[0].episodes[0].occur_time",
            "has no offset",
        ),
        (
            lambda d: d["projects"][0]["sessions"][0]["episodes"][0]["extraction"]["relationships"][
                0
            ].update({"to": "Acme"}),
            "projects[0].sessions[0].episodes[0].extraction.relationships[0].to",
            "'Acme' is not a name in this extraction's entities",
        ),
        (
            lambda d: d["projects"][2]["expected"]["as_of"][0].update({"expect": ["zurich"]}),
            "projects[2].expected.as_of[0].expect",
            "disagrees with expected.relationships",
        ),
        (
            lambda d: d["projects"][2]["expected"]["entities"][0].update({"type": "professor"}),
            "projects[2].expected.entities[0].type",
            "'professor' is not one of person, place",
        ),
    ],
)
def test_a_bad_set_fails_naming_the_place(tmp_path, mutate, place, problem):
    path = changed_dev_set(tmp_path, mutate)
    with pytest.raises(DataError) as info:
        load([path])
    assert f"{path}: {place}: " in str(info.value) and problem in str(info.value)


def test_the_set_knows_the_services_entity_types_and_the_dev_set_is_big_enough():
    assert set(ENTITY_TYPES) == set(SERVICE_TYPES)
    dev = load([DEV_SET])
    assert len(dev.projects) >= 3 and len(dev.episodes()) >= 60
    assert any(e.imported for e in dev.episodes())
    # The midpoint of every expected interval is probed, as well as the set's own times.
    for project in dev.projects:
        midpoints = [p for p in project.probes if p.origin == "midpoint"]
        assert len(midpoints) == len(project.facts)


def test_a_bad_set_stops_the_command_with_its_place(tmp_path, capsys):
    path = changed_dev_set(tmp_path, lambda d: d["projects"][0].pop("expected"))
    assert cli_main(["eval", "graph", "--target", "127.0.0.1:1", "--data", str(path)]) == 2
    assert f"{path}: projects[0]: missing 'expected'" in capsys.readouterr().err


# The careful stand-in ---------------------------------------------------------------------


def test_the_careful_model_answers_the_services_own_resolution_prompt_from_gold():
    model = CarefulModel(load([DEV_SET]))
    # The exchange where "Alex" is Alex Chen, asked the way the service asks.
    episode = next(e for e in model.episodes if e.user.startswith("Alex from the data team"))
    kim = Candidate(11, "Alex Kim", "person", ("Alex Kim", "Alex"), "Designer", ("Alex Kim ...",))
    chen = Candidate(12, "Alex Chen", "person", ("Alex Chen",), "Data engineer")
    atlas = Candidate(13, "Atlas", "project", ("Atlas",))
    messages = build_resolution_messages(
        f"User message:\n{episode.user}\n\nAI response:\n{episode.assistant}",
        [
            Question(1, "Alex", "person", None, [kim, chen]),
            Question(2, "Atlas", "project", None, [atlas]),
            Question(3, "Alex", "person", None, [kim]),
        ],
    )
    reply = model("/api/chat", {"messages": messages, "format": {"type": "object"}})
    assert reply is not None
    assert json.loads(reply.content) == {
        "answers": [
            {"name": 1, "entity_id": 12},
            {"name": 2, "entity_id": 13},
            {"name": 3, "entity_id": 0},  # Alex Kim is not this Alex: none of these
        ]
    }


def test_the_careful_model_answers_an_extraction_without_the_gold_keys():
    model = CarefulModel(load([DEV_SET]))
    episode = model.episodes[3]
    prompt = (
        f"Known entities: ...\n\nUser message:\n{episode.user}\n\nAI response:\n{episode.assistant}"
    )
    schema = {"type": "object", "properties": {"entities": {}, "relationships": {}}}
    reply = model(
        "/api/chat", {"messages": [{"role": "user", "content": prompt}], "format": schema}
    )
    assert reply is not None
    answer = json.loads(reply.content)
    assert [e["name"] for e in answer["entities"]] == [m.name for m in episode.entities]
    assert all("is" not in e for e in answer["entities"])
    # A summary quotes the episodes too, but asks for no extraction schema.
    summary = model("/api/chat", {"messages": [{"role": "user", "content": prompt}]})
    assert summary is not None and "entities" not in summary.content
