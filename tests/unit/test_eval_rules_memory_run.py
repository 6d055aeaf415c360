"""``nexus-grpc eval memories``' run (evaluation/memory_eval.py) without a
server: which fact a memory states, the set's refusals, a formation's end
read from its events, the storing and reading back on stand-in stubs
(tests/unit/grpc_stubs.py's), and the printed report.

Its scoring on hand-made memories is in test_eval_memory.py; the dev set
against issue 27's bar, through a real server, stays in
tests/e2e/service/test_memory_eval.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nexus_grpc.evaluation import memory_eval
from nexus_grpc.evaluation.memory_eval import DataError, EvalError, Fact, match
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.unit.grpc_stubs import Stub

FACTS = {
    "a-home": Fact("a-home", "alice", ("The user lives in Porto.",)),
    "b-home": Fact("b-home", "bob", ("The user lives in Porto.",)),
    "a-cat": Fact("a-cat", "alice", ("The user has a cat called Miso.",)),
    "launch": Fact("launch", "", ("The Atlas launch moved to Friday the 14th.",)),
}


def memory(content: str, user: str = "alice") -> memory_pb2.Memory:
    return memory_pb2.Memory(content=content, user_id=user)


def test_a_memory_states_the_fact_whose_text_it_is_case_and_punctuation_aside():
    assert match(memory("the user has a cat called miso"), FACTS) == "a-cat"
    # Two owners with the same words: the memory's own owner's fact.
    assert match(memory("The user lives in Porto", "bob"), FACTS) == "b-home"
    assert match(memory("The user lives in Porto", "alice"), FACTS) == "a-home"


def test_a_memory_worded_its_own_way_states_a_fact_when_it_has_two_thirds_of_its_words():
    # launch's words, stop words aside: atlas, launch, moved, friday, 14th (5).
    assert match(memory("Atlas launch moved: Friday", ""), FACTS) == "launch"  # 4 of 5
    assert match(memory("Atlas launch is soon", ""), FACTS) is None  # 2 of 5
    assert match(memory("The user greeted the assistant warmly today."), FACTS) is None


def _write(tmp_path, projects: list[dict[str, Any]]) -> str:
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"projects": projects}))
    return str(path)


def _episode(*memories: dict[str, Any], occur_time: str = "2024-03-01T10:00:00") -> dict:
    return {"user": "u", "assistant": "a", "occur_time": occur_time, "memories": list(memories)}


def _cat(about: str = "user") -> dict[str, Any]:
    return {"fact": "cat", "topic": "pet", "content": "The user has a cat.", "about": about}


def test_a_set_is_refused_naming_the_place_of_what_is_wrong(tmp_path):
    """Loading a bad file and naming its place is load's own job."""
    missing = str(tmp_path / "nowhere.json")
    with pytest.raises(DataError, match="nowhere.json"):
        memory_eval.load([missing])
    two_owners = _write(tmp_path, [{
        "sessions": [{"user_id": "u", "episodes": [_episode(_cat(), _cat("project"))]}],
        "expected": {"live": [{"fact": "cat"}]},
    }])  # fmt: skip
    with pytest.raises(DataError, match=r"memories\[1\]: fact 'cat' belongs to two owners"):
        memory_eval.load([two_owners])
    twice = _write(tmp_path, [{
        "sessions": [{"user_id": "u", "episodes": [_episode(_cat())]}],
        "expected": {"live": [{"fact": "cat"}], "archived": [{"fact": "cat"}]},
    }])  # fmt: skip
    with pytest.raises(DataError, match="fact 'cat' is both live and archived"):
        memory_eval.load([twice])
    undated = _write(tmp_path, [{
        "sessions": [{"user_id": "u", "episodes": [_episode(occur_time="yesterday")]}],
    }])  # fmt: skip
    with pytest.raises(DataError, match=r"sessions\[0\].episodes\[0\].occur_time"):
        memory_eval.load([undated])
    wordless = _write(tmp_path, [{"sessions": [{"episodes": [{"user": 1}]}]}])
    with pytest.raises(DataError, match=r"episodes\[0\].user must be a str"):
        memory_eval.load([wordless])


def test_facts_said_in_two_files_gather_their_texts(tmp_path):
    said = [("one.json", "The user has a cat."), ("two.json", "The user owns a cat.")]
    paths = []
    for name, content in said:
        path = tmp_path / name
        episode = _episode({"fact": "cat", "topic": "pet", "content": content})
        path.write_text(json.dumps({"projects": [{
            "sessions": [{"user_id": "u", "episodes": [episode]}],
            "expected": {"live": [{"fact": "cat"}]},
        }]}))  # fmt: skip
        paths.append(str(path))
    data = memory_eval.load(paths)
    assert data.name == "one+two" and data.episodes == 2 and len(data.projects) == 2
    assert data.facts == {"cat": Fact("cat", "u", ("The user has a cat.", "The user owns a cat."))}


# A formation's end, and the run on stand-in stubs ------------------------------------------------


class Events:
    """WatchExtractions' call: its events, then the end of the stream."""

    def __init__(self, events: list[graph_pb2.ExtractionEvent]) -> None:
        self.events = events
        self.cancelled = False

    def __aiter__(self) -> Any:
        return self._each()

    async def _each(self) -> Any:
        for e in self.events:
            yield e

    def cancel(self) -> None:
        self.cancelled = True


def _run(events: dict[int, list[graph_pb2.ExtractionEvent]], memory: Stub) -> memory_eval._Run:
    calls: list[Events] = []

    def watch(request: Any, metadata: Any = None) -> Events:
        calls.append(Events(events[request.episode_id]))
        return calls[-1]

    graph = Stub()
    graph.WatchExtractions = watch  # type: ignore[method-assign]
    run = memory_eval._Run(memory, graph, (), 5.0)  # type: ignore[arg-type]
    run.watches = calls  # type: ignore[attr-defined]
    return run


DONE, FAILED = graph_pb2.EXTRACTION_STATUS_DONE, graph_pb2.EXTRACTION_STATUS_FAILED


def _formed(status: int = DONE, llm_calls: int = 1, error: str = "") -> Any:
    return graph_pb2.ExtractionEvent(
        status=status, error=error,
        memory_formation=graph_pb2.MemoryFormationOutcome(llm_calls=llm_calls),
    )  # fmt: skip


async def test_a_formations_end_is_its_first_event_with_an_outcome_counting_extractions_calls():
    events = {
        1: [
            graph_pb2.ExtractionEvent(status=FAILED, error="timeout"),
            graph_pb2.ExtractionEvent(status=DONE, llm_calls=2),
            _formed(),
        ],
        2: [graph_pb2.ExtractionEvent(status=DONE, llm_calls=1)],  # the stream ended first
    }
    run = _run(events, Stub())
    first = await run.formation_end(1)
    assert first is not None and first.HasField("memory_formation")
    assert run.llm_calls == 2 and run.failed == ["episode 1: extraction: timeout"]
    assert await run.formation_end(2) is None and run.llm_calls == 3
    assert all(w.cancelled for w in run.watches)  # type: ignore[attr-defined]


PROJECT = {
    "key": "p1",
    "memory_formation": "USER_AND_PROJECT",
    "sessions": [
        {"key": "s1", "user_id": "alice", "episodes": [_episode(), _episode()]},
        {"key": "s2", "user_id": "bob", "agent_id": "helper",
         "episodes": [{**_episode(), "import": True}]},
    ],
}  # fmt: skip


def _memory_stub(imported: Any) -> Stub:
    made = iter(range(10, 20))
    return Stub(
        CreateProject=memory_pb2.Project(id=7),
        CreateSession=lambda r: memory_pb2.Session(id=100 + len(r.session.user_id)),
        CreateEpisode=lambda r: memory_pb2.Episode(id=next(made)),
        ImportEpisodes=imported,
    )


async def test_the_run_stores_each_episode_then_counts_its_formation():
    memory = _memory_stub(memory_pb2.ImportEpisodesResponse(episode_ids=[30]))
    events = {10: [_formed(llm_calls=2)], 11: [_formed(FAILED, 1, "bad JSON")], 30: []}
    run = _run(events, memory)
    project_id, sessions = await memory_eval._store(run, PROJECT, "eval x")
    assert project_id == 7 and sessions == {"s1": 105, "s2": 103}
    [created] = memory.requests["CreateProject"]
    assert created.project.name == "eval x p1"
    assert created.project.memory_formation == memory_pb2.MEMORY_FORMATION_USER_AND_PROJECT
    bob = memory.requests["CreateSession"][1].session
    assert (bob.user_id, bob.agent_id) == ("bob", "helper")
    # Two formations ended (one failed), the imported episode's never came.
    assert run.formed == 2 and run.llm_calls == 3
    assert run.failed == ["s1[1]: formation: bad JSON"]
    assert [r.session_id for r in memory.requests["CreateEpisode"]] == [105, 105]


async def test_an_import_the_server_refuses_stops_the_run():
    refused = memory_pb2.ImportEpisodesResponse(
        failed=1, errors=[memory_pb2.ImportEpisodeError(message="occur_time is in the future")]
    )
    run = _run({10: [_formed()], 11: [_formed()]}, _memory_stub(refused))
    with pytest.raises(EvalError, match="import refused: occur_time is in the future"):
        await memory_eval._store(run, PROJECT, "eval x")


async def test_every_memory_is_read_back_once_through_each_sessions_scope_and_pages():
    pages = {
        (105, ""): memory_pb2.ListMemoriesResponse(
            memories=[memory_pb2.Memory(id=1), memory_pb2.Memory(id=2)], next_page_token="n"
        ),
        (105, "n"): memory_pb2.ListMemoriesResponse(memories=[memory_pb2.Memory(id=3)]),
        # The project's memories come back through every session's scope.
        (103, ""): memory_pb2.ListMemoriesResponse(
            memories=[memory_pb2.Memory(id=2), memory_pb2.Memory(id=4)]
        ),
    }
    memory = Stub(ListMemories=lambda r: pages[(r.scope.session_id, r.page_token)])
    found = await memory_eval._kept(_run({}, memory), 7, PROJECT, {"s1": 105, "s2": 103})
    assert [m.id for m in found] == [1, 2, 3, 4]
    scopes = [r.scope for r in memory.requests["ListMemories"]]
    assert [(s.user_id, s.include_archived, s.project_id) for s in scopes] == [
        ("alice", True, 7), ("alice", True, 7), ("bob", True, 7)
    ]  # fmt: skip


def test_the_report_prints_the_figures_thirty_misses_and_ten_failures():
    report = {
        "set": "dev", "episodes": 40, "formation_events": 39, "seconds": 12.5,
        "facts_kept": 0.9, "facts": 20, "stale_live": 1, "stale_checked": 6,
        "archived_lost": 0, "absent_formed": 2, "duplicates": 3, "unexpected": 4, "leaks": 0,
        "llm_calls_per_episode": 1.25,
        "misses": [f"miss {n}" for n in range(35)],
        "failures": [f"failure {n}" for n in range(12)],
    }  # fmt: skip
    lines = memory_eval.format_report(report).splitlines()
    assert lines[0] == "set dev: 40 episodes, 39 formation events, 12.5 s"
    assert "facts kept:            0.900 (20 facts)" in lines
    assert "stale facts live:      1 (of 6 that must not be)" in lines
    assert "LLM calls per episode: 1.25" in lines
    assert sum(1 for line in lines if line.startswith("  - ")) == 30
    assert sum(1 for line in lines if line.startswith("  ! ")) == 10
    assert lines[-1] == "  ! failure 9"
