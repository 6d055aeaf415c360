"""The graph evaluation's set format (evaluation/graph_set.py): each way a set
file can be wrong is refused naming its place, on the committed dev set
(bench/eval/graph-dev.json) with one thing changed, written under tmp_path
(loading a file is load's own job). Five of its refusals are in
test_eval_graph.py; these are the others, and what a set holds once loaded:
the facts that hold now and the facts as of a time."""

from __future__ import annotations

import json

import pytest

from nexus_grpc.evaluation.graph_set import DataError, load
from tests.unit.graph_dev_set import DEV_SET, changed_dev_set

P0 = "projects[0]"
E0 = f"{P0}.sessions[0].episodes[0]"


def _episode(d: dict) -> dict:
    return d["projects"][0]["sessions"][0]["episodes"][0]


def _expected(d: dict) -> dict:
    return d["projects"][0]["expected"]


CASES = [
    (lambda d: d["projects"].__setitem__(0, []), P0, "expected an object, got list"),
    (lambda d: d["projects"][0].update(sessions={}), f"{P0}.sessions", "expected a list, got dict"),
    (lambda d: d["projects"][0].update(sessions=[]), f"{P0}.sessions", "must not be empty"),
    (lambda d: _episode(d).update(user=" "), f"{E0}.user", "expected non-empty text"),
    (lambda d: _episode(d).update(colour="red"), E0, "unknown field 'colour' (known: "),
    (lambda d: _episode(d).update(occur_time="yesterday"), f"{E0}.occur_time",
     "'yesterday' is not an ISO 8601 time such as 2024-03-01T09:00:00Z"),
    (lambda d: _episode(d).update(occur_time=5), f"{E0}.occur_time",
     "expected an ISO 8601 time such as 2024-03-01T09:00:00Z"),
    (lambda d: _episode(d).update({"import": "yes"}), f"{E0}.import", "expected true or false"),
    (lambda d: _episode(d)["extraction"]["relationships"][0].update(label="Lives In"),
     f"{E0}.extraction.relationships[0].label", "'Lives In' is not a snake_case label"),
    (lambda d: _episode(d)["extraction"]["entities"][0].update(notes=3),
     f"{E0}.extraction.entities[0].notes", "expected text or null"),
    (lambda d: _episode(d)["extraction"]["entities"].append(
        dict(_episode(d)["extraction"]["entities"][0], name="MAYA")),
     f"{E0}.extraction.entities[5].name", "'MAYA' (person) is listed twice in this extraction"),
    (lambda d: _episode(d)["extraction"]["entities"][0].update(type="place"),
     f"{E0}.extraction.entities[0].type", "'place', but 'maya' is a person in"),
    (lambda d: _expected(d)["entities"].append(dict(_expected(d)["entities"][0])),
     f"{P0}.expected.entities[{{n}}].key", "'maya' is used twice"),
    (lambda d: _expected(d)["relationships"][0].update(
        valid_to=_expected(d)["relationships"][0]["valid_from"]),
     f"{P0}.expected.relationships[0].valid_to", "must be after valid_from"),
]  # fmt: skip


@pytest.mark.parametrize(("mutate", "place", "problem"), CASES)
def test_a_bad_set_is_refused_naming_the_place_of_what_is_wrong(tmp_path, mutate, place, problem):
    path = changed_dev_set(tmp_path, mutate)
    entities = len(json.loads(DEV_SET.read_text())["projects"][0]["expected"]["entities"])
    with pytest.raises(DataError) as info:
        load([path])
    said = str(info.value)
    assert said.startswith(f"{path}: {place.format(n=entities)}: "), said
    assert problem in said, said


def test_no_file_an_unreadable_one_and_two_that_clash_are_refused(tmp_path):
    with pytest.raises(DataError, match="no set file given"):
        load([])
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(DataError, match="broken.json"):
        load([broken])
    twice = tmp_path / "twice"
    twice.mkdir()
    copy = twice / "copy.json"
    copy.write_text(DEV_SET.read_text())
    # The same projects twice: their names (and their users' words) are the other file's.
    with pytest.raises(DataError) as info:
        load([DEV_SET, copy])
    assert "project name" in str(info.value) and f"is also {DEV_SET}" in str(info.value)


def test_the_same_words_twice_in_a_set_are_refused(tmp_path):
    """Two episodes with the same user text would be one exchange to the service."""

    def mutate(d: dict) -> None:
        first = d["projects"][0]["sessions"][0]["episodes"]
        first[1]["user"] = first[0]["user"]

    with pytest.raises(DataError, match=r"episodes\[1\]\.user: the same text as"):
        load([changed_dev_set(tmp_path, mutate)])


def test_a_loaded_set_knows_which_facts_hold_now_and_which_held_at_a_time():
    project = load([DEV_SET]).projects[0]
    now = project.current()
    ended = [f for f in project.facts if f.valid_to is not None]
    assert ended, "the dev set has a fact that ended"
    fact = ended[0]
    # Not now (unless another fact of the same source and label holds it again)...
    holds_now = any(
        f.valid_to is None
        and (f.source, f.label, f.target) == (fact.source, fact.label, fact.target)
        for f in project.facts
    )
    assert (fact.target in now.get((fact.source, fact.label), frozenset())) == holds_now
    # ...but at its midpoint, and not before it began.
    middle = (fact.valid_from + fact.valid_to) / 2
    assert fact.target in project.expected_at(fact.source, fact.label, middle)
    assert fact.holds_at(middle) and not fact.holds_at(fact.valid_from - 1)
