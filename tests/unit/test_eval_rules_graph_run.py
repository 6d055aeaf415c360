"""``nexus-grpc eval graph``'s run (evaluation/graph_eval.py) without a server:
its calls answered by stand-in stubs (tests/unit/grpc_stubs.py: an object
per service whose methods answer a request from a table), its report's
arithmetic on plain values.

What an episode's event tells (its status, its entities; none within the
timeout), a server that cannot extract stopping the run with the reason, an
import refused naming its place, the graph read back (undone merges left
out, the LLM's merges listed, sources followed to their target, aliases
counted by method, pages followed), a project scored from it (mentions
located and followed, current facts and as-of probes), the figures, the
misses, the set's totals keeping each project's keys apart, the printed
report, and the command's refusal of a lone --cert.

The dev set through a real server, a real server with no LLM and a name the
LLM settles later stay in tests/e2e/service/test_graph_eval.py; the scoring's
own arithmetic is in test_eval_graph.py."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

import grpc
import grpc.aio
import pytest

from nexus_grpc.evaluation import graph_eval
from nexus_grpc.evaluation import graph_score as score
from nexus_grpc.evaluation.graph_eval import DONE, FAILED, TIMED_OUT, EvalError
from nexus_grpc.evaluation.graph_set import (
    Episode,
    ExpectedEntity,
    ExpectedFact,
    Mention,
    Probe,
    Project,
    Session,
)
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.unit.grpc_stubs import Stub

JUNE = 1_717_200_000.0  # 2024-06-01


def client(memory: Stub | None = None, graph: Stub | None = None) -> graph_eval._Client:
    made = object.__new__(graph_eval._Client)
    made.memory, made.graph = memory or Stub(), graph or Stub()  # type: ignore[assignment]
    made.timeout, made.metadata = 5.0, ()
    return made


def episode(where: str, *mentions: Mention, imported: bool = False, n: int = 0) -> Episode:
    return Episode(
        project=0, session=0, where=where, occur_time=JUNE + n, user="u", assistant="a",
        imported=imported, entities=tuple(mentions), relationships=(), ended=(),
    )  # fmt: skip


KIM = Mention("Alex Kim", "person", None, "kim")
CHEN = Mention("Alex Chen", "person", None, "chen")
ALEX = Mention("Alex", "person", None, "chen")
LISBON = Mention("Lisbon", "place", None, "lisbon")
FIRST = episode("projects[0].sessions[0].episodes[0]", KIM, CHEN, LISBON)
SECOND = episode("projects[0].sessions[0].episodes[1]", ALEX, n=1)
PROJECT = Project(
    name="alexes",
    where="projects[0]",
    single_valued_labels=None,
    sessions=(Session("one", (FIRST, SECOND)),),
    entities={
        "kim": ExpectedEntity("kim", "Alex Kim", "person", ()),
        "chen": ExpectedEntity("chen", "Alex Chen", "person", ("Alex",)),
        "lisbon": ExpectedEntity("lisbon", "Lisbon", "place", ()),
    },
    facts=(ExpectedFact("kim", "lives_in", "lisbon", JUNE, None),),
    probes=(Probe("kim", "lives_in", JUNE + 10, frozenset({"lisbon"}), "set"),),
)


def seen(i: int, name: str, kind: str = "person") -> score.SeenEntity:
    return score.SeenEntity(i, name, kind, (name,))


# An episode's event ----------------------------------------------------------------------


def test_an_episodes_event_gives_its_status_calls_and_entities_and_none_is_a_timeout():
    outcome = graph_eval.Outcome(FIRST)
    graph_eval._take(outcome, None)
    assert (outcome.status, outcome.error) == (
        TIMED_OUT,
        "no extraction event within the episode timeout",
    )
    event = graph_pb2.ExtractionEvent(
        status=graph_pb2.EXTRACTION_STATUS_FAILED, error="runner crashed", llm_calls=2,
        entities=[graph_pb2.Entity(id=4, name="Lisbon", type="place", aliases=["Lisboa"])],
    )  # fmt: skip
    graph_eval._take(outcome, event)
    assert (outcome.status, outcome.error, outcome.llm_calls) == (FAILED, "runner crashed", 2)
    assert outcome.entities == [score.SeenEntity(4, "Lisbon", "place", ("Lisboa",))]
    graph_eval._take(outcome, graph_pb2.ExtractionEvent(status=graph_pb2.EXTRACTION_STATUS_DONE))
    assert outcome.status == DONE
    graph_eval._take(outcome, graph_pb2.ExtractionEvent(status=0))
    assert outcome.status == "status 0"


class Call:
    """WatchExtractions' call: ``read()`` answers the first message, or raises."""

    def __init__(self, read: Any) -> None:
        self._read = read
        self.cancelled = False

    async def read(self) -> Any:
        if isinstance(self._read, BaseException):
            raise self._read
        return self._read

    def cancel(self) -> None:
        self.cancelled = True


def _rpc_error(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="x")


@pytest.mark.parametrize(
    ("read", "found"),
    [
        (graph_pb2.ExtractionEvent(episode_id=4), True),
        (grpc.aio.EOF, False),
        (_rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED), False),
    ],
)
async def test_the_first_event_is_awaited_and_none_within_the_limit_is_none(read, found):
    call = Call(read)
    graph = Stub()
    graph.WatchExtractions = lambda request, timeout, metadata: call  # type: ignore[method-assign]
    event = await client(graph=graph).event(4, 1.0)
    assert (event is not None) == found and call.cancelled


async def test_a_refused_watch_is_not_taken_for_a_timeout():
    call = Call(_rpc_error(grpc.StatusCode.PERMISSION_DENIED))
    graph = Stub()
    graph.WatchExtractions = lambda request, timeout, metadata: call  # type: ignore[method-assign]
    with pytest.raises(grpc.aio.AioRpcError):
        await client(graph=graph).event(4, 1.0)
    assert call.cancelled


# A server that cannot extract --------------------------------------------------------------


def _status(state: str, *dependencies: memory_pb2.DependencyStatus) -> Stub:
    return Stub(GetServiceStatus=memory_pb2.ServiceStatus(state=state, dependencies=dependencies))


def _dep(name: str, ok: bool = True, off: bool = False, detail: str = "") -> Any:
    return memory_pb2.DependencyStatus(name=name, ok=ok, off=off, detail=detail)


async def test_a_server_without_an_llm_stops_the_run_naming_the_episode_and_why():
    memory = _status("SERVING", _dep("embedder"), _dep("ollama", off=True, detail="not configured"))
    with pytest.raises(EvalError) as info:
        await graph_eval._check_serving(client(memory), FIRST, 1.0)
    assert str(info.value) == (
        "projects[0].sessions[0].episodes[0]: no extraction event within 1s, and the server"
        " is SERVING without an LLM (ollama: not configured)"
    )


async def test_a_server_not_serving_names_what_is_down_and_one_serving_goes_on():
    down = _status("NOT_SERVING", _dep("store", ok=False, detail="disk full"), _dep("openai"))
    with pytest.raises(EvalError) as info:
        await graph_eval._check_serving(client(down), SECOND, 30.0)
    assert str(info.value).endswith("within 30s, and the server is NOT_SERVING (store: disk full)")
    unexplained = _status("DEGRADED")
    with pytest.raises(EvalError, match=r"is DEGRADED \(no reason given\)"):
        await graph_eval._check_serving(client(unexplained), SECOND, 30.0)
    # An LLM that is on: the episode was slow, the run goes on.
    await graph_eval._check_serving(client(_status("SERVING", _dep("openai"))), SECOND, 30.0)


async def test_an_import_refused_stops_the_run_naming_its_place():
    refused = memory_pb2.ImportEpisodesResponse(
        failed=1, errors=[memory_pb2.ImportEpisodeError(message="occur_time is in the future")]
    )
    memory = Stub(ImportEpisodes=refused)
    late = episode("projects[0].sessions[0].episodes[2]", imported=True)
    with pytest.raises(EvalError) as info:
        await client(memory).store(late, 3, "r-1")
    assert str(info.value) == (
        "projects[0].sessions[0].episodes[2]: ImportEpisodes refused it:"
        " occur_time is in the future"
    )
    silent = Stub(ImportEpisodes=memory_pb2.ImportEpisodesResponse())
    with pytest.raises(EvalError, match="no episode id came back"):
        await client(silent).store(late, 3, "r-1")
    taken = Stub(ImportEpisodes=memory_pb2.ImportEpisodesResponse(episode_ids=[41]))
    assert await client(taken).store(late, 3, "r-1") == 41
    # One that is not imported is created, at its own time, with its request id.
    made = Stub(CreateEpisode=memory_pb2.Episode(id=42))
    assert await client(made).store(FIRST, 3, "r-2") == 42
    [request] = made.requests["CreateEpisode"]
    assert (request.session_id, request.request_id) == (3, "r-2")
    assert request.occur_time.seconds == int(JUNE)


async def test_the_settle_wait_returns_what_is_still_queued_when_it_gives_up():
    queues = [
        memory_pb2.QueueStatus(kind="extract:episode", pending=2),
        memory_pb2.QueueStatus(kind="embed:episode", pending=9),  # not a settling queue
    ]
    busy = Stub(GetServiceStatus=memory_pb2.ServiceStatus(queues=queues))
    said: list[str] = []
    pending = await graph_eval._settle(
        client(busy), -1.0, lambda text, final=False: said.append(text)
    )
    assert pending == {"extract:episode": 2} and said == []
    idle = Stub(GetServiceStatus=memory_pb2.ServiceStatus(queues=queues[1:]))
    assert await graph_eval._settle(client(idle), 60.0, lambda *a, **k: None) == {}


# The graph read back and scored ---------------------------------------------------------------


def _merge(target: int, sources: list[int], method: int, undone: bool = False) -> Any:
    merge = graph_pb2.EntityMerge(
        target_id=target, source_ids=sources, method=method, reason="same person"
    )
    if undone:
        merge.undo_time.seconds = 1
    return merge


def _graph_stub(facts: dict[int, list[graph_pb2.Relationship]]) -> Stub:
    pages = {
        "": graph_pb2.ListEntitiesResponse(
            entities=[graph_pb2.Entity(id=1, name="Alex Kim", type="person")],
            next_page_token="2",
        ),
        "2": graph_pb2.ListEntitiesResponse(
            entities=[
                graph_pb2.Entity(id=2, name="Alex Chen", type="person"),
                graph_pb2.Entity(id=4, name="Lisbon", type="place", resolution_pending=True),
            ]
        ),
    }
    merges = graph_pb2.ListMergesResponse(
        merges=[
            _merge(1, [3], graph_pb2.MERGE_METHOD_LLM, undone=True),  # undone: as if never
            _merge(5, [3], graph_pb2.MERGE_METHOD_MANUAL),
            _merge(2, [5], graph_pb2.MERGE_METHOD_LLM),
        ]
    )
    aliases = {
        1: [graph_pb2.RESOLUTION_METHOD_NEW],
        2: [graph_pb2.RESOLUTION_METHOD_NEW, graph_pb2.RESOLUTION_METHOD_LLM],
        4: [graph_pb2.RESOLUTION_METHOD_EXACT, 99],
    }
    return Stub(
        ListEntities=lambda r: pages[r.page_token],
        ListMerges=merges,
        ListEntityAliases=lambda r: graph_pb2.ListEntityAliasesResponse(
            aliases=[graph_pb2.EntityAlias(method=m) for m in aliases[r.entity_id]]
        ),
        ListRelationships=lambda r: graph_pb2.ListRelationshipsResponse(
            relationships=facts.get(r.entity_id, [])
        ),
    )


LIVES = graph_pb2.Relationship(from_id=1, to_id=4, label="lives_in")


async def test_the_graph_read_back_follows_merges_and_counts_aliases_by_method():
    state = await graph_eval._read_graph(client(graph=_graph_stub({})), 7)
    assert sorted(state.entities) == [1, 2, 4]  # both pages
    # The undone merge is left out; a later merge moves what an earlier one made.
    assert state.merged_into == {3: 5, 5: 2}
    assert state.llm_merges == [(2, (5,), "same person")]
    assert state.alias_methods == Counter({"new": 2, "llm": 1, "exact": 1, "unspecified": 1})


async def test_a_project_is_scored_on_the_mentions_followed_to_where_they_are_now():
    run = graph_eval.ProjectRun(PROJECT, project_id=7)
    first, second = graph_eval.Outcome(FIRST, status=DONE), graph_eval.Outcome(SECOND, status=DONE)
    first.entities = [seen(1, "Alex Kim"), seen(2, "Alex Chen"), seen(4, "Lisbon", "place")]
    second.entities = [seen(3, "Alex")]  # since merged (3 -> 5 -> 2) into Alex Chen
    run.outcomes = [first, second]
    scored, state = await graph_eval._score_project(client(graph=_graph_stub({1: [LIVES]})), run)
    assert scored.predicted == {(0, 0, 0): 1, (0, 0, 1): 2, (0, 0, 2): 4, (0, 1, 0): 2}
    assert scored.gold == {(0, 0, 0): "kim", (0, 0, 1): "chen", (0, 0, 2): "lisbon",
                           (0, 1, 0): "chen"}  # fmt: skip
    assert scored.located == Counter({score.FOUND: 4})
    # Kim lives in Lisbon now and at the probe's time: both as expected.
    assert scored.current == (1, 1) and scored.as_of == (1, 1)
    assert scored.wrong_current == [] and scored.wrong_as_of == []
    assert state.merged_into == {3: 5, 5: 2}


async def test_a_fact_that_does_not_hold_and_a_mention_not_found_are_misses():
    run = graph_eval.ProjectRun(PROJECT, project_id=7)
    first, second = graph_eval.Outcome(FIRST, status=DONE), graph_eval.Outcome(SECOND)
    first.entities = [seen(1, "Alex Kim"), seen(2, "Alex Chen"), seen(4, "Lisbon", "place")]
    run.outcomes = [first, second]  # the second never had its event
    porto = graph_pb2.Relationship(from_id=1, to_id=2, label="lives_in")
    graph = _graph_stub({1: [porto]})
    scored, state = await graph_eval._score_project(client(graph=graph), run)
    assert scored.located == Counter({score.FOUND: 3, score.MISSING: 1})
    assert scored.unlocated == [
        "projects[0].sessions[0].episodes[1]: 'Alex' (person) missing in the TIMED_OUT event"
    ]
    assert scored.current == (0, 1)  # kim lives_in: {chen}, not {lisbon}
    [probe] = scored.wrong_as_of
    assert (probe.subject, probe.expected, probe.actual, probe.time) == (
        "kim", ("lisbon",), ("chen",), JUNE + 10
    )  # fmt: skip
    probed = [r for r in graph.requests["ListRelationships"] if r.HasField("as_of")]
    assert [(r.entity_id, r.as_of.seconds) for r in probed] == [(1, int(JUNE + 10))]
    misses = graph_eval._misses(run, scored, state)
    assert misses["episodes"] == [
        {"where": SECOND.where, "status": TIMED_OUT, "error": ""},
    ]
    assert misses["llm_merges"] == ["? (#5) into Alex Chen (#2): same person"]
    assert misses["pending_entities"] == ["Lisbon (#4)"]
    assert misses["as_of"][0]["time"] == "2024-06-01T00:00:10Z"
    assert {(m["subject"], m["label"]) for m in misses["current_facts"]} == {("kim", "lives_in")}


# The figures and the report ---------------------------------------------------------------------


def _scored(project: str) -> graph_eval.Scored:
    scored = graph_eval.Scored()
    scored.gold = {(0, 0, 0): "lisbon", (0, 0, 1): "porto"}
    scored.predicted = {(0, 0, 0): 1, (0, 0, 1): 1}  # one entity for two places
    scored.located = Counter({score.FOUND: 2, score.AMBIGUOUS: 1})
    scored.current, scored.as_of = (1, 2), (3, 4)
    scored.names = {1: "Lisbon"}
    return scored


def test_the_figures_count_each_outcome_and_llm_calls_of_done_episodes_only():
    done = graph_eval.Outcome(FIRST, status=DONE, llm_calls=3)
    failed = graph_eval.Outcome(SECOND, status=FAILED, llm_calls=5)
    late = graph_eval.Outcome(episode("w", imported=True))
    state = graph_eval.GraphState(
        {1: graph_pb2.Entity(id=1, resolution_pending=True), 2: graph_pb2.Entity(id=2)},
        {}, [(1, (2,), "r")], Counter({"new": 2}),
    )  # fmt: skip
    f = graph_eval._figures(_scored("p"), [done, failed, late], [state])
    assert (f["episodes"], f["done"], f["failed"], f["timed_out"], f["imported"]) == (3, 1, 1, 1, 1)
    assert (f["llm_calls"], f["llm_calls_per_episode"]) == (3, 3.0)
    assert (f["mentions"], f["mentions_located"], f["mentions_ambiguous"]) == (2, 2, 1)
    assert (f["gold_entities"], f["predicted_entities"], f["false_merges"]) == (2, 1, 1)
    assert f["current_facts"] == {"correct": 1, "groups": 2, "accuracy": 0.5}
    assert f["as_of"] == {"correct": 3, "probes": 4, "accuracy": 0.75}
    assert (f["llm_merges"], f["resolution_pending"], f["entities"]) == (1, 1, 2)
    assert graph_eval._figures(graph_eval.Scored(), [failed], [])["llm_calls_per_episode"] == 0.0


def test_the_sets_totals_keep_each_projects_keys_apart():
    whole = graph_eval.Scored()
    graph_eval._add_scores(whole, "one", _scored("one"))
    other = _scored("two")
    other.gold = {(1, 0, 0): "lisbon"}
    other.predicted = {(1, 0, 0): 9}
    graph_eval._add_scores(whole, "two", other)
    # "lisbon" of two projects is two places: no false merge across them.
    assert whole.gold[(0, 0, 0)] == "one/lisbon" and whole.gold[(1, 0, 0)] == "two/lisbon"
    assert score.false_merges(whole.gold, whole.predicted) == 1  # only project one's
    assert (whole.current, whole.as_of) == ((2, 4), (6, 8))
    assert whole.located[score.FOUND] == 4


def test_the_report_prints_each_project_the_total_and_every_miss():
    state = graph_eval.GraphState({}, {}, [], Counter({"llm": 3, "exact": 1}))
    f = graph_eval._figures(_scored("p"), [graph_eval.Outcome(FIRST, status=DONE)], [state])
    run = graph_eval.ProjectRun(PROJECT)
    run.outcomes = [graph_eval.Outcome(SECOND, status=FAILED, error="boom")]
    scored = _scored("p")
    scored.unlocated = [f"mention {n}" for n in range(22)]
    scored.gold[(0, 1, 0)], scored.predicted[(0, 1, 0)] = "porto", 2  # porto split in two
    scored.wrong_current = [score.Mismatch("kim", "lives_in", ("lisbon",), ())]
    scored.wrong_as_of = [score.Mismatch("kim", "lives_in", ("lisbon",), ("porto",), JUNE)]
    state.llm_merges.append((1, (2,), "same city"))
    state.entities[2] = graph_pb2.Entity(id=2, name="Oporto", resolution_pending=True)
    scored.names[2] = "Oporto"
    report = {
        "seconds": 1.5,
        "still_pending_after_settle": {"resolve:entity": 1},
        "total": f,
        "projects": {"alexes": f},
        "misses": {"alexes": graph_eval._misses(run, scored, state)},
    }
    text = graph_eval.format_report(report)
    assert text.startswith("1 episodes in 1 projects (0 imported late): 1 DONE, 0 FAILED")
    assert "aliases by how they were resolved: exact 1, llm 3" in text
    assert "still queued after the settle wait: {'resolve:entity': 1}" in text
    assert "  false merge: Lisbon (#1) holds lisbon, porto" in text
    assert f"  FAILED: {SECOND.where}: boom" in text
    assert "  not found: mention 19" in text and "mention 20" not in text
    assert "  ... 2 more not found" in text
    assert "  split: porto is kept as Lisbon (#1), Oporto (#2)" in text
    assert "  current: kim lives_in: expected ['lisbon'], got []" in text
    assert "  as of 2024-06-01T00:00:00Z: kim lives_in: expected ['lisbon'], got ['porto']" in text
    assert "  LLM merge: Oporto (#2) into Lisbon (#1): same city" in text
    assert "  pending: Oporto (#2)" in text
    [alexes, total] = [line for line in text.splitlines() if line.startswith(("alexes ", "all "))]
    # One entity for two places: B3 precision 1/2, recall 1, F1 2/3.
    assert alexes.split()[1:4] == ["0.500", "1.000", "0.667"]
    assert alexes[22:] == total[22:]


# The command ------------------------------------------------------------------------------------


def _args(**given: Any) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    graph_eval.add_arguments(parser)
    flags = [f"--{k}={v}" for k, v in given.items()]
    return parser.parse_args(["--data", "set.json", *flags])


def test_the_command_refuses_a_lone_cert_or_key_and_mtls_without_roots(tmp_path, capsys):
    pem = tmp_path / "x.pem"
    pem.write_text("-----BEGIN-----")
    assert graph_eval.main(_args(cert=pem)) == 2
    assert "--cert and --key go together (mTLS)" in capsys.readouterr().err
    assert graph_eval.main(_args(cert=pem, key=pem)) == 2
    assert "--cert/--key need --cacert (mTLS runs over TLS)" in capsys.readouterr().err
    assert graph_eval.main(_args(cacert=tmp_path / "missing.pem")) == 2
    assert "missing.pem" in capsys.readouterr().err


# The whole run on stand-in stubs ---------------------------------------------------------------


def _watch(events: dict[int, list[Any]]) -> Any:
    """WatchExtractions answering each episode's reads in turn (EOF: none yet)."""

    def watch(request: Any, timeout: Any, metadata: Any) -> Call:
        return Call(events[request.episode_id].pop(0))

    return watch


async def test_a_run_stores_each_episode_in_turn_and_reads_a_late_one_again_after_settling():
    """The second episode's event is not there within its timeout (the server
    is serving, with an LLM: the run goes on); once the queues are settled it
    is read again, and counts as DONE."""
    made = iter([51, 52])
    memory = Stub(
        CreateProject=memory_pb2.Project(id=7),
        CreateSession=memory_pb2.Session(id=70),
        CreateEpisode=lambda r: memory_pb2.Episode(id=next(made)),
        GetServiceStatus=memory_pb2.ServiceStatus(state="SERVING", dependencies=[_dep("ollama")]),
        GetUsage=memory_pb2.GetUsageResponse(
            total=memory_pb2.UsagePeriod(
                stages=[memory_pb2.StageUsage(stage="extraction", calls=2, prompt_tokens=300)]
            )
        ),
    )
    chen = graph_pb2.Entity(id=2, name="Alex Chen", type="person", aliases=["Alex"])
    first = graph_pb2.ExtractionEvent(
        status=graph_pb2.EXTRACTION_STATUS_DONE, llm_calls=1,
        entities=[graph_pb2.Entity(id=1, name="Alex Kim", type="person"), chen,
                  graph_pb2.Entity(id=4, name="Lisbon", type="place")],
    )  # fmt: skip
    late = graph_pb2.ExtractionEvent(
        status=graph_pb2.EXTRACTION_STATUS_DONE, llm_calls=1, entities=[chen]
    )
    graph = _graph_stub({1: [LIVES]})
    graph.WatchExtractions = _watch({51: [first], 52: [grpc.aio.EOF, late]})  # type: ignore[method-assign]
    graph_set = graph_eval.GraphSet(files=("alexes.json",), projects=(PROJECT,))
    report = await graph_eval._run(
        client(memory, graph), graph_set, "t:1", 1.0, -1.0, graph_eval.Progress(None)
    )
    t = report["total"]
    assert (t["episodes"], t["done"], t["timed_out"]) == (2, 2, 0)
    assert (t["mentions"], t["mentions_located"], t["bcubed_f1"], t["false_merges"]) == (
        4, 4, 1.0, 0
    )  # fmt: skip
    assert t["current_facts"]["accuracy"] == 1.0 and t["as_of"]["accuracy"] == 1.0
    assert (t["llm_calls"], t["llm_calls_per_episode"]) == (2, 1.0)
    assert t["llm_cost"]["calls"] == 2 and t["llm_tokens_per_episode"] == 150.0
    assert report["still_pending_after_settle"] == {}
    one = report["projects"]["alexes"]
    assert one["project_id"] == 7 and [e["episode_id"] for e in one["episodes"]] == [51, 52]
    assert one["episodes"][1]["entities"] == ["Alex Chen (person, #2)"]
    assert report["misses"]["alexes"]["episodes"] == []
    # Each episode stored in its session with a request id of its own.
    ids = [r.request_id for r in memory.requests["CreateEpisode"]]
    assert len(set(ids)) == 2 and all(r.session_id == 70 for r in memory.requests["CreateEpisode"])
    assert memory.requests["CreateProject"][0].project.name.startswith("graph-eval alexes ")
