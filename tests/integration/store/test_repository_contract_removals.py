"""The repositories' contract for removals: what the domain reads of a removal
before it queues the index jobs that take the rows' points out of the vector
index (domain/erasure.drop_points), and what the delete then takes. The same
cases on the fakes (tests/fakes.py) and on both real stores (the ``run``
fixture of conftest.py)."""

from __future__ import annotations

import time
from typing import Any

from nexus_grpc.core.graph import ASSERT
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.records import UPDATE, ChangedBy
from nexus_grpc.errors import NotFound


def _memory(session_id: int, tier: Tier, kind: MemoryKind, user_id: str) -> dict[str, Any]:
    return {
        "kind": int(kind), "title": "t", "content": "c", "tier": int(tier), "project_id": 0,
        "agent_id": "", "user_id": user_id, "session_id": session_id, "confidence": 0.9,
        "metadata": {},
    }  # fmt: skip


def _world(uow: Any) -> dict[str, int]:
    """A session outside any project with rows of every kind, beside a
    session in a project and another lone session whose rows must stay."""
    project = uow.projects.insert({"name": "p"}, "t1").id
    lone = uow.sessions.insert("lone", "", 0, {}, "t1", user_id="ann").id
    inside = uow.sessions.insert("inside", "", project, {}, "t1").id
    other = uow.sessions.insert("other", "", 0, {}, "t1").id
    names = {"project": project, "lone": lone, "inside": inside, "other": other}
    for name, session in (("ep1", lone), ("ep2", lone), ("ep_in", inside), ("ep_other", other)):
        names[name] = uow.episodes.insert(session, name, "", {}, None).id
    for name, session in (("sum", lone), ("sum_in", inside), ("sum_other", other)):
        names[name] = uow.summaries.insert(session_id=session, project_id=0, content=name).id
    names["overview"] = uow.summaries.insert(session_id=0, project_id=project, content="o").id
    for name, graph in (
        ("ann", (0, lone)), ("bob", (0, lone)), ("proj", (project, 0)), ("far", (0, other)),
    ):  # fmt: skip
        names[name] = uow.graph.insert_entity(graph, name, "person", None, source="manual")
    uow.graph.add_evidence(names["ann"], names["bob"], "knows", ASSERT, 100.0)
    for name, session, tier, kind, user in (
        ("task_user", lone, Tier.TASK, MemoryKind.USER, "ann"),
        ("task_project", lone, Tier.TASK, MemoryKind.PROJECT, ""),
        ("longterm", lone, Tier.LONGTERM, MemoryKind.USER, "ann"),
        ("task_other", other, Tier.TASK, MemoryKind.USER, "ann"),
    ):
        names[name] = uow.memories.insert(_memory(session, tier, kind, user), None, "t1").id
    previous = uow.memories.get(names["task_project"])
    uow.memories.record(previous, UPDATE, ["content"], ChangedBy("r-1"))
    return names


async def test_a_sessions_removal_targets_are_its_episodes_summaries_own_graph_and_task_memories(
    run,
):
    def case(uow):
        names = _world(uow)
        kinds = {
            "episodes": ("ep1", "ep2", "ep_in", "ep_other"),
            "summaries": ("sum", "sum_in", "sum_other", "overview"),
            "entities": ("ann", "bob", "proj", "far"),
            "memories": ("task_user", "task_project", "longterm", "task_other"),
        }
        by_id = {kind: {names[n]: n for n in members} for kind, members in kinds.items()}

        def named(targets: Any) -> dict[str, list[str]]:
            return {kind: [by_id[kind][i] for i in getattr(targets, kind)] for kind in kinds}

        s = uow.sessions
        return (
            named(s.removal_targets([names["lone"]])),
            named(s.removal_targets([names["lone"]], user_task_memories=False)),
            named(s.removal_targets([names["inside"], names["other"]])),
            named(s.removal_targets([])),
        )

    whole, project_only, two, none = await run(case)
    assert whole == {
        "episodes": ["ep1", "ep2"],
        "summaries": ["sum"],
        "entities": ["ann", "bob"],
        "memories": ["task_user", "task_project"],
    }
    # A delete no user asked for (the retention sweep) leaves their TASK memories.
    assert project_only == {**whole, "memories": ["task_project"]}
    # A session in a project has no graph of its own: the project's stays.
    assert two == {
        "episodes": ["ep_in", "ep_other"],
        "summaries": ["sum_in", "sum_other"],
        "entities": ["far"],
        "memories": ["task_other"],
    }
    assert none == {"episodes": [], "summaries": [], "entities": [], "memories": []}


async def test_a_session_delete_takes_what_its_removal_targets_named_and_nothing_else(run):
    def case(uow):
        names = _world(uow)
        lone = names["lone"]
        before = uow.sessions.removal_targets([lone], user_task_memories=False)
        refused = False
        try:
            uow.sessions.delete(lone, "t2")
        except NotFound:
            refused = True
        episodes = uow.sessions.delete(lone, "t1", user_task_memories=False)
        try:
            uow.sessions.get(lone)
            gone = False
        except NotFound:
            gone = True
        after = uow.sessions.removal_targets([lone])
        return (
            refused,
            episodes,
            gone,
            (before.episodes, before.summaries, before.entities, before.memories),
            [uow.episodes.find(names[n]) is None for n in ("ep1", "ep2", "ep_other")],
            [uow.summaries.find(names[n]) is None for n in ("sum", "sum_other", "overview")],
            [
                uow.memories.find(names[n]) is None
                for n in ("task_project", "task_user", "longterm", "task_other")
            ],  # fmt: skip
            uow.memories.last(names["task_project"]),
            uow.graph.evidence_of(names["ann"], "knows"),
            (after.episodes, after.summaries, after.entities, after.memories),
            names,
        )

    (refused, episodes, gone, before, episodes_gone, summaries_gone, memories_gone, history,
     evidence, after, names) = await run(case)  # fmt: skip
    assert refused and gone
    assert episodes == 2
    assert before == (
        (names["ep1"], names["ep2"]),
        (names["sum"],),
        (names["ann"], names["bob"]),
        (names["task_project"],),
    )
    assert episodes_gone == [True, True, False]
    assert summaries_gone == [True, False, False]
    # The user's TASK memory stays (the retention sweep's delete), as do the others.
    assert memories_gone == [True, False, False, False]
    assert history is None
    assert evidence == []
    # What is left of the session: only the memory no one asked to remove.
    assert after == ((), (), (), (names["task_user"],))


async def test_the_reads_of_an_erasures_summaries(run):
    """The overviews written since a time, per project, and which sessions
    still hold an episode (to be summarised again from what is left)."""

    def case(uow):
        names = _world(uow)
        project = names["project"]
        later = time.time() + 3600
        empty = uow.sessions.insert("empty", "", 0, {}, "t1").id
        return (
            uow.erasures.overviews_since({project: 0.0}),
            uow.erasures.overviews_since({project: later}),
            uow.erasures.overviews_since({}),
            uow.erasures.sessions_with_episodes([names["lone"], empty, names["other"], 999]),
            uow.erasures.sessions_with_episodes([]),
            names,
        )

    every, none, nothing, held, no_sessions, names = await run(case)
    assert every == [names["overview"]]
    assert none == nothing == no_sessions == []
    assert held == sorted([names["lone"], names["other"]])
