"""What a hook recalls and records (agent_hooks/recall.py, capture.py) and where
(agent_hooks/workspace.py), on a stand-in for its wire: an object with the ``call``
and ``stream`` of agent_hooks/wire.py that answers from rows this module holds and
fails with ``grpc.RpcError`` as a channel does. Project ids are remembered in a
dict standing in for the cache file; the cache file itself is the last test's.

Here: a session start's memories, most important first; a prompt's selection, the
memory search standing in when it fails, other sessions' exchanges only; reading
creating nothing; a stop's request (its id, its cut text, its metadata), a stop
run again, a session of another project, the project's name lost in a race; a
project that is gone forgotten. (A hook run as the host runs it, against a real
server: tests/e2e/agent_hooks/test_hook_run.py.)"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from nexus_grpc.agent_hooks import capture, recall, run
from nexus_grpc.agent_hooks.deadline import Deadline, DeadlinePassed
from nexus_grpc.agent_hooks.hosts import Event
from nexus_grpc.agent_hooks.payloads import HookInput
from nexus_grpc.agent_hooks.project_cache import ProjectCache, default_path
from nexus_grpc.agent_hooks.wire import Credentials, pb
from nexus_grpc.agent_hooks.workspace import Workspace
from nexus_grpc.session_names import session_external_id


class Failed(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str = "") -> None:
        super().__init__(details)
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return str(self.args[0]) if self.args else ""


class Stream:
    def __init__(self, answer: list[Any] | Failed) -> None:
        self.answer = answer
        self.cancelled = False

    def __iter__(self) -> Iterator[Any]:
        if isinstance(self.answer, Failed):
            raise self.answer
        return iter(self.answer)

    def cancel(self) -> None:
        self.cancelled = True


class StandInWire:
    """``call`` and ``stream`` by method name; ``fail[method]`` is raised once."""

    def __init__(self) -> None:
        self.projects: list[Any] = []
        self.sessions: dict[str, Any] = {}
        self.calls: list[tuple[str, Any, float]] = []
        self.fail: dict[str, Failed] = {}
        self.answers: dict[str, Any] = {}
        self.streams: dict[str, Stream] = {}

    def called(self, method: str) -> list[Any]:
        return [request for name, request, _ in self.calls if name == method]

    def _fail(self, method: str) -> None:
        if method in self.fail:
            raise self.fail.pop(method)

    def call(self, method: str, request: Any, timeout: float) -> Any:
        self.calls.append((method, request, timeout))
        self._fail(method)
        if method == "ListProjects":
            return pb.ListProjectsResponse(projects=self.projects)
        if method == "GetServiceStatus":
            return pb.ServiceStatus(tenant="t1")
        if method == "CreateProject":
            created = pb.Project(id=len(self.projects) + 1, name=request.project.name, tenant="t1")
            self.projects.append(created)
            return created
        if method == "GetSession":
            found = self.sessions.get(request.external_id)
            if found is None:
                raise Failed(grpc.StatusCode.NOT_FOUND)
            return found
        if method == "CreateSession":
            session = pb.Session()
            session.CopyFrom(request.session)
            session.id = 20 + len(self.sessions)
            self.sessions[session.external_id] = session
            return session
        if method == "CreateEpisode":
            return pb.Episode(id=301, session_id=request.session_id)
        pages = self.answers[method]
        return pages[getattr(request, "page_token", "")]

    def stream(self, method: str, request: Any, timeout: float) -> Stream:
        self.calls.append((method, request, timeout))
        return self.streams[method]


class Cache:
    """The project cache's methods, over a dict."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def get(self, project: str) -> int | None:
        return self.ids.get(project)

    def put(self, project: str, project_id: int) -> None:
        self.ids[project] = project_id

    def forget(self, project: str) -> None:
        self.ids.pop(project, None)


def workspace(wire: StandInWire, cache: Cache | None = None) -> Workspace:
    return Workspace(wire, Deadline(60.0), host="claude", project="webshop",  # type: ignore[arg-type]
                     user="ann", cache=cache or Cache())  # type: ignore[arg-type]  # fmt: skip


def with_project(wire: StandInWire) -> StandInWire:
    wire.projects = [pb.Project(id=1, name="webshop", tenant="t1")]
    return wire


def memory(id_: int, title: str, tier: int = pb.TIER_SESSION, **fields: Any) -> Any:
    return pb.Memory(id=id_, title=title, content=f"about {title}", tier=tier,
                     kind=pb.MEMORY_KIND_PROJECT, **fields)  # fmt: skip


def stop(
    prompt: str = "", response: str = "", prompt_id: str = "", session: str = "s1"
) -> HookInput:
    return HookInput(Event.STOP, "Stop", session, "/repo", prompt=prompt, response=response,
                     prompt_id=prompt_id)  # fmt: skip


# --- the workspace ---------------------------------------------------------------------


def test_reading_creates_nothing_and_a_missing_project_recalls_nothing():
    wire = StandInWire()
    ws = workspace(wire)
    assert ws.project_id(create=False) == 0
    composed = recall.at_session_start(ws, "s1", recall.Budgets())
    assert composed.text == "" and composed.memories == 0
    assert recall.at_prompt(ws, "s1", "what port?", recall.Budgets()).text == ""
    assert wire.called("CreateProject") == [] and wire.called("ListMemories") == []
    assert ws.cache.ids == {}  # type: ignore[attr-defined]


def test_the_project_is_the_one_of_the_keys_tenant_and_is_remembered():
    wire = StandInWire()
    wire.projects = [pb.Project(id=4, name="webshop", tenant="t0"),
                     pb.Project(id=9, name="webshop", tenant="t1")]  # fmt: skip
    cache = Cache()
    ws = workspace(wire, cache)
    assert ws.project_id(create=False) == 9
    assert cache.ids == {"webshop": 9}
    looked = len(wire.calls)
    assert ws.project_id(create=True) == 9 and len(wire.calls) == looked  # no second lookup
    ws.forget_project()
    assert cache.ids == {}


def test_a_create_that_loses_the_race_settles_on_the_project_the_tenant_holds():
    wire = StandInWire()
    wire.fail["CreateProject"] = Failed(grpc.StatusCode.ALREADY_EXISTS)
    winner = pb.Project(id=6, name="webshop", tenant="t1")
    original = wire.call

    def call(method: str, request: Any, timeout: float) -> Any:
        if method == "CreateProject":
            wire.projects = [winner]  # the other hook's project appears meanwhile
        return original(method, request, timeout)

    wire.call = call  # type: ignore[method-assign]
    assert workspace(wire).project_id(create=True) == 6
    # Refused for another reason, the refusal goes on.
    other = StandInWire()
    other.fail["CreateProject"] = Failed(grpc.StatusCode.PERMISSION_DENIED)
    with pytest.raises(grpc.RpcError):
        workspace(other).project_id(create=True)


def test_a_session_another_hook_created_first_is_the_one_used():
    wire = with_project(StandInWire())
    key = session_external_id("webshop", "s1")
    wire.fail["CreateSession"] = Failed(grpc.StatusCode.ALREADY_EXISTS)
    looks = 0
    original = wire.call

    def call(method: str, request: Any, timeout: float) -> Any:
        nonlocal looks
        if method == "GetSession":
            looks += 1
            if looks == 2:
                wire.sessions[key] = pb.Session(id=55, external_id=key, project_id=1)
        return original(method, request, timeout)

    wire.call = call  # type: ignore[method-assign]
    assert workspace(wire).open_session("s1", 1).id == 55


# --- a session's start -----------------------------------------------------------------


def test_a_session_start_recalls_the_most_important_memories_first():
    wire = with_project(StandInWire())
    newer = memory(4, "newer, otherwise the same")
    newer.update_time.FromSeconds(2_000)
    older = memory(5, "older")
    older.create_time.FromSeconds(1_000)
    rows = [
        older,
        memory(2, "used often", use_count=5),
        memory(3, "Deploys", tier=pb.TIER_LONGTERM, confidence=0.5),
        newer,
        memory(6, "confident", confidence=0.9),
        memory(7, "longterm and sure", tier=pb.TIER_LONGTERM, confidence=1.0),
    ]
    rows[2].content = "Deploys go out blue-green"
    rows[5].kind = pb.MEMORY_KIND_USER
    wire.answers["ListMemories"] = {
        "": pb.ListMemoriesResponse(memories=rows[:3], next_page_token="p2"),
        "p2": pb.ListMemoriesResponse(memories=rows[3:]),
    }
    composed = recall.at_session_start(workspace(wire), "s1", recall.Budgets())
    lines = [line for line in composed.text.splitlines() if line.startswith("- ")]
    assert lines == [
        "- (user) longterm and sure: about longterm and sure",
        "- (project) Deploys go out blue-green",  # the content repeats the title
        "- (project) used often: about used often",
        "- (project) confident: about confident",
        "- (project) newer, otherwise the same: about newer, otherwise the same",
        "- (project) older: about older",
    ]
    assert "What this project and user have in memory, most important first:" in composed.text
    scope = wire.called("ListMemories")[0].scope
    assert (scope.project_id, scope.user_id, scope.session_id) == (1, "ann", 0)


def test_a_resumed_session_reads_its_own_and_a_project_gone_is_forgotten():
    wire = with_project(StandInWire())
    key = session_external_id("webshop", "s1")
    wire.sessions[key] = pb.Session(id=33, external_id=key, project_id=1)
    wire.answers["ListMemories"] = {"": pb.ListMemoriesResponse()}
    cache = Cache()
    ws = workspace(wire, cache)
    assert recall.at_session_start(ws, "s1", recall.Budgets()).text == ""
    assert wire.called("ListMemories")[0].scope.session_id == 33
    wire.fail["ListMemories"] = Failed(grpc.StatusCode.PERMISSION_DENIED)
    with pytest.raises(grpc.RpcError):
        recall.at_session_start(ws, "s1", recall.Budgets())
    assert cache.ids == {}


# --- a prompt --------------------------------------------------------------------------


def episode_hit(session_id: int, said: str) -> Any:
    episode = pb.Episode(session_id=session_id, user_message=said, ai_response=f"re: {said}")
    episode.occur_time.FromSeconds(1_765_065_600)
    return pb.SearchHit(episode=episode)


def prompt_streams(wire: StandInWire, *, selection: list[Any] | Failed, search: list[Any] | Failed,
                   episodes: list[Any] | Failed) -> None:  # fmt: skip
    wire.streams = {
        "SelectMemories": Stream(selection),
        "SearchMemories": Stream(search),
        "SearchEpisodes": Stream(episodes),
    }


def test_a_prompt_brings_the_selection_and_other_sessions_exchanges():
    wire = with_project(StandInWire())
    key = session_external_id("webshop", "s1")
    wire.sessions[key] = pb.Session(id=33, external_id=key, project_id=1)
    prompt_streams(
        wire,
        selection=[pb.SelectedMemory(memory=memory(1, "selected"))],
        search=[pb.MemoryHit(memory=memory(2, "searched"))],
        episodes=[episode_hit(33, "mine")] + [episode_hit(40, f"q{i}") for i in range(7)],
    )
    long_prompt = "p" * 12_000
    composed = recall.at_prompt(workspace(wire), "s1", long_prompt, recall.Budgets(prompt=5000))
    assert (composed.memories, composed.exchanges) == (1, 5)
    assert "(project) selected: about selected" in composed.text
    assert "searched" not in composed.text and wire.streams["SearchMemories"].cancelled
    assert "mine" not in composed.text  # the session's own exchanges are in its context
    assert "2025-12-07: the user said \u201cq0\u201d; the answer was \u201cre: q0\u201d" in (
        composed.text
    )
    select = wire.called("SelectMemories")[0]
    assert (len(select.prompt), select.thread_id, select.limit) == (10_000, key, 8)
    assert len(wire.called("SearchMemories")[0].query) == 2_000
    assert wire.called("SearchEpisodes")[0].limit == 10
    timeouts = {name: timeout for name, _, timeout in wire.calls if name.startswith("S")}
    assert timeouts["SelectMemories"] == pytest.approx(timeouts["SearchMemories"] * 0.75, rel=0.01)


def test_the_memory_search_stands_in_when_selection_fails():
    wire = with_project(StandInWire())
    prompt_streams(wire, selection=Failed(grpc.StatusCode.DEADLINE_EXCEEDED),
                   search=[pb.MemoryHit(memory=memory(2, "searched"))],
                   episodes=Failed(grpc.StatusCode.UNAVAILABLE))  # fmt: skip
    cache = Cache()
    composed = recall.at_prompt(workspace(wire, cache), "s1", "port?", recall.Budgets())
    assert (composed.memories, composed.exchanges) == (1, 0)
    assert "(project) searched: about searched" in composed.text
    assert cache.ids == {"webshop": 1}  # neither failure says the project is gone


def test_when_every_call_fails_the_last_failure_is_raised_and_a_gone_project_forgotten():
    wire = with_project(StandInWire())
    prompt_streams(wire, selection=Failed(grpc.StatusCode.UNAVAILABLE),
                   search=Failed(grpc.StatusCode.NOT_FOUND),
                   episodes=Failed(grpc.StatusCode.INTERNAL, "last"))  # fmt: skip
    cache = Cache()
    with pytest.raises(grpc.RpcError) as raised:
        recall.at_prompt(workspace(wire, cache), "s1", "port?", recall.Budgets())
    assert raised.value.code() == grpc.StatusCode.INTERNAL  # type: ignore[attr-defined]
    assert cache.ids == {}


def test_a_blank_prompt_asks_nothing():
    wire = with_project(StandInWire())
    assert recall.at_prompt(workspace(wire), "s1", " \n", recall.Budgets()).text == ""
    assert [name for name, _, _ in wire.calls if name.startswith("S")] == []


# --- a stop ----------------------------------------------------------------------------


def test_a_stop_records_the_exchange_under_its_prompts_id():
    wire = StandInWire()
    recorded = capture.record(workspace(wire), "codex", stop("Port?", "5433.", "turn-7"))
    assert recorded == capture.Recorded(301, 20)
    [request] = wire.called("CreateEpisode")
    assert (request.user_message, request.ai_response) == ("Port?", "5433.")
    assert (request.request_id, request.project_id, request.session_id) == ("codex:turn-7", 1, 20)
    assert dict(request.metadata) == {
        "source": "nexus-grpc hooks", "host": "codex", "prompt_id": "turn-7",
    }  # fmt: skip
    session = wire.called("CreateSession")[0].session
    assert (session.name, session.project_id, session.user_id) == ("s1", 1, "ann")
    assert dict(session.metadata) == {
        "source": "nexus-grpc hooks", "host": "claude", "agent_session_id": "s1",
    }  # fmt: skip
    long_id = capture.record(workspace(wire), "codex", stop("a", "b", "x" * 300))
    assert long_id.episode_id == 301
    assert wire.called("CreateEpisode")[-1].request_id == ("codex:" + "x" * 300)[:200]


def test_without_a_prompt_id_the_exchanges_words_stand_in_for_it():
    turn = capture.exchange_of("claude", stop("Port?", "5433."))
    digest = hashlib.sha256(b"Port?\x005433.").hexdigest()[:32]
    assert turn.prompt_id == f"sha256:{digest}"
    assert capture.exchange_of("claude", stop("Port?", "5433.")) == turn
    assert capture.exchange_of("claude", stop("Port?", "5434.")).prompt_id != turn.prompt_id


def test_a_side_over_the_limit_is_cut_saying_how_much():
    wire = StandInWire()
    capture.record(workspace(wire), "claude", stop("q" * 100_500, "a", "p1"))
    sent = wire.called("CreateEpisode")[0].user_message
    assert len(sent) == 100_000
    assert sent.endswith("\n[… 540 characters cut by nexus-grpc hooks]")


def test_a_stop_with_nothing_to_record_says_which_side_is_missing():
    wire = StandInWire()
    with pytest.raises(capture.NothingToRecord, match="Stop of session s1 has no answer to record"):
        capture.record(workspace(wire), "claude", stop("Port?", " ", "p1"))
    with pytest.raises(capture.NothingToRecord, match="has no prompt to record"):
        capture.record(workspace(wire), "claude", stop("", "5433.", "p1"))
    assert wire.calls == []


def test_a_stop_run_again_with_other_words_keeps_the_first_recording():
    wire = StandInWire()
    wire.fail["CreateEpisode"] = Failed(grpc.StatusCode.ALREADY_EXISTS)
    assert capture.record(workspace(wire), "claude", stop("q", "a", "p1")) == capture.Recorded(
        0, 20
    )
    wire.fail["CreateEpisode"] = Failed(grpc.StatusCode.UNAVAILABLE)
    with pytest.raises(grpc.RpcError):
        capture.record(workspace(wire), "claude", stop("q", "a", "p1"))


def test_a_session_of_another_project_is_refused_and_a_gone_project_forgotten():
    wire = with_project(StandInWire())
    key = session_external_id("webshop", "s1")
    wire.sessions[key] = pb.Session(id=70, external_id=key, project_id=0)
    with pytest.raises(ValueError) as refused:
        capture.record(workspace(wire), "claude", stop("q", "a", "p1"))
    assert str(refused.value) == (
        "agent session s1 is nexus session 70, which belongs to no project, not to project"
        " 'webshop' (1); nothing recorded"
    )
    assert wire.called("CreateEpisode") == []
    cache = Cache()
    wire.fail["GetSession"] = Failed(grpc.StatusCode.PERMISSION_DENIED)
    with pytest.raises(grpc.RpcError):
        capture.record(workspace(wire, cache), "claude", stop("q", "a", "p1"))
    assert cache.ids == {}


# --- the deadline, the cache file, the credentials --------------------------------------


def test_a_deadline_gives_each_call_what_is_left_and_none_once_it_passed():
    assert 59 < Deadline(60.0).left() <= 60
    passed = Deadline(2.0, started=time.monotonic() - 3)
    with pytest.raises(DeadlinePassed, match="the 2 s deadline passed"):
        passed.left()
    assert passed.elapsed() >= 3


def test_the_project_cache_keys_by_server_and_key_and_never_holds_the_key(tmp_path):
    path = tmp_path / "cache" / "projects.json"
    mine = ProjectCache(path, target="h:1", api_key="sekret")
    mine.put("webshop", 9)
    assert mine.get("webshop") == 9
    assert ProjectCache(path, target="h:1", api_key="other").get("webshop") is None
    assert ProjectCache(path, target="h:2", api_key="sekret").get("webshop") is None
    assert "sekret" not in path.read_text()
    mine.forget("webshop")
    assert mine.get("webshop") is None
    path.write_text("not json")
    assert mine.get("webshop") is None  # a broken file is a miss
    assert default_path({"XDG_CACHE_HOME": "/c"}).as_posix() == (
        "/c/nexus-grpc/agent-hooks-projects.json"
    )
    assert (
        default_path({"HOME": "/h"}).as_posix() == "/h/.cache/nexus-grpc/agent-hooks-projects.json"
    )
    assert not Credentials(api_key="k").tls and Credentials(root_certificates=b"pem").tls


# --- the command around them -----------------------------------------------------------


def test_the_default_project_is_the_git_work_trees_folder_else_the_folder():
    repo = Path(__file__).resolve().parents[2]  # this checkout: its .git marks the work tree
    assert run.project_name(str(repo / "tests" / "unit")) == repo.name
    assert run.project_name("/proc/self/..") == "proc"  # no .git above it


def test_a_failure_is_told_saying_the_servers_status_and_message():
    assert run._describe(Failed(grpc.StatusCode.UNAUTHENTICATED, "unknown API key")) == (
        "the server answered UNAUTHENTICATED: unknown API key"
    )
    assert run._describe(Failed(grpc.StatusCode.UNAVAILABLE)) == "the server answered UNAVAILABLE"
    assert run._describe(DeadlinePassed("the 2 s deadline passed")) == "the 2 s deadline passed"
    assert run._describe(KeyError()) == "KeyError"


def test_the_key_comes_from_its_file_then_the_flag_then_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("NEXUS_API_KEY", "from-env")
    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    given = argparse.Namespace(api_key_file=str(key_file), api_key="from-flag")
    assert run._api_key(given) == "from-file"
    assert run._api_key(argparse.Namespace(api_key_file="", api_key="from-flag")) == "from-flag"
    assert run._api_key(argparse.Namespace(api_key_file="", api_key="")) == "from-env"
