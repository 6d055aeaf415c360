"""The MCP tools (mcp/tools.py), their workspace (mcp/workspace.py) and the project
lookup by name under them (client/name_lookup.py), given a stand-in client object in
place of ``NexusClient``: what each tool asks the client for, the shape of what it
answers (mcp/results.py), the rules it applies to what came back (a session or an
entity of another project, a tier the server cannot filter, a limit met), and a
failed call answered as a tool error that says its status.

The stand-in answers from rows held in this module, as views of messages (the
client's own ``MessageView``), and raises ``NexusClientError`` as the client does.
(The tools through ``nexus-grpc mcp`` itself, against a real server, over stdio and
HTTP: tests/e2e/mcp/test_mcp_agents.py and test_mcp_workspace.py.)"""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from nexus_grpc.client import NexusClientError
from nexus_grpc.client.name_lookup import find_or_create_project, find_project
from nexus_grpc.client.views import EMPTY_REASON_KEY, SELECTION_METHOD_KEY, view
from nexus_grpc.errors import ResourceInfo
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.mcp.results import EXISTING_KEY
from nexus_grpc.mcp.tools import MemoryTools
from nexus_grpc.mcp.workspace import Workspace, WorkspaceOptions, external_id_for


class Stream:
    """What a streaming method returns: ``collect()`` and the trailers' reasons."""

    def __init__(self, items: list[Any], trailers: dict[str, str] | None = None) -> None:
        self.items = items
        self.empty_reason = (trailers or {}).get(EMPTY_REASON_KEY)
        self.selection_method = (trailers or {}).get(SELECTION_METHOD_KEY)

    async def collect(self) -> list[Any]:
        return self.items


def refused(code: grpc.StatusCode, message: str, **kwargs: Any) -> NexusClientError:
    return NexusClientError(code, message, "req-1", **kwargs)


class StandInClient:
    """The calls the tools and their workspace make, answered from its own rows."""

    def __init__(self, tenant: str = "t1") -> None:
        self.tenant = tenant
        self.projects: list[memory_pb2.Project] = []
        self.sessions: dict[str, memory_pb2.Session] = {}
        self.memories: list[memory_pb2.Memory] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: dict[str, NexusClientError] = {}
        self.answers: dict[str, Any] = {}

    def _note(self, name: str, fields: dict[str, Any]) -> None:
        self.calls.append((name, fields))
        if name in self.fail:
            raise self.fail.pop(name)

    def called(self, name: str) -> list[dict[str, Any]]:
        return [fields for called, fields in self.calls if called == name]

    async def get_service_status(self, **fields: Any) -> Any:
        self._note("get_service_status", fields)
        return view(memory_pb2.ServiceStatus(tenant=self.tenant))

    async def list_projects(self, **fields: Any) -> Any:
        self._note("list_projects", fields)
        return view(memory_pb2.ListProjectsResponse(projects=self.projects))

    async def create_project(self, **fields: Any) -> Any:
        self._note("create_project", fields)
        project = memory_pb2.Project()
        project.CopyFrom(fields["project"])
        project.id, project.tenant = len(self.projects) + 1, self.tenant
        self.projects.append(project)
        return view(project)

    async def get_session(self, **fields: Any) -> Any:
        self._note("get_session", fields)
        session = self.sessions.get(fields["external_id"])
        if session is None:
            raise refused(grpc.StatusCode.NOT_FOUND, "no such session")
        return view(session)

    async def create_session(self, **fields: Any) -> Any:
        self._note("create_session", fields)
        session = memory_pb2.Session()
        session.CopyFrom(fields["session"])
        session.id = 100 + len(self.sessions)
        self.sessions[session.external_id] = session
        return view(session)

    async def create_memory(self, **fields: Any) -> Any:
        self._note("create_memory", fields)
        memory = memory_pb2.Memory()
        memory.CopyFrom(fields["memory"])
        memory.id = 500 + len(self.memories)
        memory.confidence = 1.0
        memory.create_time.FromSeconds(1_700_000_000)
        memory.update_time.FromSeconds(1_700_000_000)
        self.memories.append(memory)
        return view(memory, self.answers.pop("create_memory_trailers", {}))

    async def list_memories(self, **fields: Any) -> Any:
        self._note("list_memories", fields)
        pages = self.answers.get("list_memories")
        if pages is not None:
            return pages[fields["page_token"]]
        return view(memory_pb2.ListMemoriesResponse(memories=self.memories))

    def search_memories(self, **fields: Any) -> Stream:
        self._note("search_memories", fields)
        return self.answers["search_memories"]

    def select_memories(self, **fields: Any) -> Stream:
        self._note("select_memories", fields)
        return self.answers["select_memories"]

    def search_episodes(self, **fields: Any) -> Stream:
        self._note("search_episodes", fields)
        return self.answers["search_episodes"]

    async def create_episode(self, **fields: Any) -> Any:
        self._note("create_episode", fields)
        return view(memory_pb2.Episode(id=1, session_id=fields["session_id"],
                                       user_message=fields["user_message"]))  # fmt: skip

    def search_entities(self, **fields: Any) -> Stream:
        self._note("search_entities", fields)
        return self.answers["search_entities"]

    async def get_memory(self, **fields: Any) -> Any:
        self._note("get_memory", fields)
        return view(self.answers["get_memory"])

    async def delete_memory(self, **fields: Any) -> Any:
        self._note("delete_memory", fields)
        return view(memory_pb2.DeleteMemoryResponse())

    async def get_entity(self, **fields: Any) -> Any:
        self._note("get_entity", fields)
        return view(self.answers["get_entity"])

    async def get_neighborhood(self, **fields: Any) -> Any:
        self._note("get_neighborhood", fields)
        return view(self.answers["get_neighborhood"])

    async def list_summaries(self, **fields: Any) -> Any:
        self._note("list_summaries", fields)
        return view(self.answers.get("list_summaries", summary_pb2.ListSummariesResponse()))

    async def list_episodes(self, **fields: Any) -> Any:
        self._note("list_episodes", fields)
        return view(self.answers.get("list_episodes", memory_pb2.ListEpisodesResponse()))


def tools_on(client: StandInClient, **options: str) -> MemoryTools:
    workspace = Workspace(client, WorkspaceOptions(project="webshop", **options))  # type: ignore[arg-type]
    tools = MemoryTools(client, workspace, connection_session="conn-1")  # type: ignore[arg-type]
    tools.specs()
    return tools


def payload(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


def memory_row(id_: int, tier: int, session_id: int = 0, **fields: Any) -> memory_pb2.Memory:
    row = memory_pb2.Memory(
        id=id_, tier=tier, session_id=session_id, kind=memory_pb2.MEMORY_KIND_PROJECT,
        title=f"m{id_}", content=f"content {id_}", confidence=1.0, project_id=1, **fields,
    )  # fmt: skip
    row.create_time.FromSeconds(1_700_000_000 + id_)
    row.update_time.CopyFrom(row.create_time)
    return row


# --- the project by name ---------------------------------------------------------------


async def test_a_project_is_found_by_name_in_the_keys_own_tenant_else_created():
    client = StandInClient(tenant="t1")
    client.projects = [
        memory_pb2.Project(id=3, name="webshop", tenant="t0"),  # an admin sees other tenants'
        memory_pb2.Project(id=9, name="webshop", tenant="t1"),
        memory_pb2.Project(id=7, name="webshop", tenant="t1"),
    ]
    assert await find_project(client, "webshop") == 7  # type: ignore[arg-type]
    assert await find_or_create_project(client, "webshop") == 7  # type: ignore[arg-type]
    assert await find_project(client, "blog") is None  # type: ignore[arg-type]
    assert client.called("create_project") == []
    # The tenant is asked for only when some project has the name.
    before = len(client.called("get_service_status"))
    created = await find_or_create_project(client, "blog", description="d")  # type: ignore[arg-type]
    assert len(client.called("get_service_status")) == before
    assert client.called("create_project")[0]["project"].description == "d"
    assert created == 4


async def test_a_project_only_another_tenant_holds_is_created_in_the_keys_own():
    client = StandInClient(tenant="t1")
    client.projects = [memory_pb2.Project(id=3, name="webshop", tenant="t0")]
    assert await find_project(client, "webshop") is None  # type: ignore[arg-type]
    assert await find_or_create_project(client, "webshop") == 2  # type: ignore[arg-type]


async def test_a_create_that_loses_the_race_settles_on_the_project_the_refusal_names():
    client = StandInClient()
    client.fail["create_project"] = refused(
        grpc.StatusCode.ALREADY_EXISTS, "taken", details=[ResourceInfo("project", "42")]
    )
    assert await find_or_create_project(client, "webshop") == 42  # type: ignore[arg-type]
    # A refusal naming nothing, or another refusal, is the caller's.
    client.fail["create_project"] = refused(grpc.StatusCode.ALREADY_EXISTS, "taken")
    with pytest.raises(NexusClientError):
        await find_or_create_project(client, "webshop")  # type: ignore[arg-type]
    client.fail["create_project"] = refused(grpc.StatusCode.PERMISSION_DENIED, "no")
    with pytest.raises(NexusClientError):
        await find_or_create_project(client, "webshop")  # type: ignore[arg-type]


# --- sessions and who a call acts for --------------------------------------------------


async def test_a_fact_opens_the_agents_session_in_the_project_once_and_says_what_it_stored():
    client = StandInClient()
    tools = tools_on(client, agent="bot", user="ann")
    first = payload(await tools.memory_add_fact(content="The DB runs on port 5433", tier="longterm",
                                                session_id="term-1"))  # fmt: skip
    again = payload(await tools.memory_add_fact(content="deploys are blue-green",
                                                session_id="term-1"))  # fmt: skip
    assert len(client.called("create_session")) == 1
    session = client.called("create_session")[0]["session"]
    assert session.external_id == external_id_for("webshop", "term-1")
    assert (session.project_id, session.user_id, session.agent_id) == (1, "ann", "bot")
    assert dict(session.metadata) == {
        "source": "nexus-grpc mcp", "agent_session_id": "term-1", "agent": "bot",
    }  # fmt: skip
    stored = client.called("create_memory")[0]["memory"]
    assert (stored.tier, stored.agent_id, stored.title) == (
        memory_pb2.TIER_LONGTERM, "bot", "The DB runs on port 5433",
    )  # fmt: skip
    assert dict(stored.metadata) == {
        "type": "fact", "source": "nexus-grpc mcp", "agent_session_id": "term-1",
    }  # fmt: skip
    assert first == {
        "memory": {
            "id": 500, "kind": "project", "tier": "longterm", "type": "fact",
            "title": "The DB runs on port 5433", "content": "The DB runs on port 5433",
            "own_session": True, "create_time": "2023-11-14T22:13:20Z", "agent": "bot",
        },
        "already_known": False,
        "session_id": "term-1",
    }  # fmt: skip
    assert again["memory"]["tier"] == "session"


async def test_a_fact_told_twice_says_it_was_already_known():
    client = StandInClient()
    client.answers["create_memory_trailers"] = {EXISTING_KEY: "500"}
    answer = payload(await tools_on(client).memory_add_fact(content="x", session_id="s"))
    assert answer["already_known"] is True


async def test_the_session_a_call_acts_in_is_its_own_then_the_flag_then_the_connections():
    client = StandInClient()
    await tools_on(client).memory_add_fact(content="a")
    await tools_on(client, session="flagged").memory_add_fact(content="b")
    await tools_on(client, session="flagged").memory_add_fact(content="c", session_id="named")
    names = [c["session"].name for c in client.called("create_session")]
    assert names == ["conn-1", "flagged", "named"]
    no_default = tools_on(client)
    no_default.connection_session = ""
    result = await no_default.memory_add_fact(content="d")
    assert result.is_error
    assert result.structured_content["error"]["code"] == "INVALID_ARGUMENT"
    assert "session_id is required" in result.structured_content["error"]["message"]


async def test_a_session_id_of_another_project_is_refused_and_nothing_written():
    client = StandInClient()
    client.projects = [memory_pb2.Project(id=1, name="webshop", tenant="t1")]
    key = external_id_for("webshop", "term-1")
    client.sessions[key] = memory_pb2.Session(id=55, external_id=key, project_id=8)
    result = await tools_on(client).memory_add_fact(content="x", session_id="term-1")
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "FAILED_PRECONDITION"
    assert error["message"].startswith("session_id 'term-1' is nexus session 55, which belongs to"
                                       " project 8, not to project 'webshop' (1)")  # fmt: skip
    assert client.called("create_memory") == []


async def test_reads_create_nothing_and_a_session_not_yet_opened_sees_no_own_memories():
    client = StandInClient()
    client.projects = [memory_pb2.Project(id=1, name="webshop", tenant="t1")]
    client.answers["list_memories"] = {
        "": view(memory_pb2.ListMemoriesResponse(), {EMPTY_REASON_KEY: "NOTHING_STORED: none"})
    }
    answer = payload(await tools_on(client).memory_get_context(session_id="fresh"))
    assert client.called("create_session") == [] and client.called("create_project") == []
    assert client.called("list_memories")[0]["scope"].session_id == 0
    assert answer["session_exists"] is False and answer["summary"] is None
    assert answer["empty_reason"] == "NOTHING_STORED: none"
    assert client.called("list_summaries") == [] and client.called("list_episodes") == []


async def test_a_session_created_by_another_server_first_is_taken_as_it_is():
    client = StandInClient()
    client.projects = [memory_pb2.Project(id=1, name="webshop", tenant="t1")]
    key = external_id_for("webshop", "s")
    client.fail["create_session"] = refused(grpc.StatusCode.ALREADY_EXISTS, "exists")
    # The other server's session appears between this one's look and its create.
    original = client.get_session
    looks = 0

    async def get_session(**fields: Any) -> Any:
        nonlocal looks
        looks += 1
        if looks == 2:
            client.sessions[key] = memory_pb2.Session(id=77, external_id=key, project_id=1)
        return await original(**fields)

    client.get_session = get_session  # type: ignore[method-assign]
    answer = payload(await tools_on(client).memory_add_exchange(user_message="hi", session_id="s"))
    assert len(client.called("create_session")) == 1
    assert client.called("create_episode")[0]["session_id"] == 77
    assert answer["exchange"]["session_id"] == 77 and answer["session_id"] == "s"


# --- the memory tools ------------------------------------------------------------------


async def test_an_experience_is_a_session_memory_with_its_outcome_and_a_bound_on_both():
    client = StandInClient()
    tools = tools_on(client)
    answer = payload(await tools.memory_add_experience(content="tried X", outcome="it failed",
                                                       session_id="s"))  # fmt: skip
    stored = client.called("create_memory")[0]["memory"]
    assert stored.content == "tried X\n\nOutcome: it failed"
    assert stored.tier == memory_pb2.TIER_SESSION
    assert dict(stored.metadata)["outcome"] == "it failed"
    assert answer["memory"]["type"] == "experience"
    assert answer["memory"]["outcome"] == "it failed"
    too_long = await tools.memory_add_experience(content="x" * 99_990, outcome="y" * 20,
                                                 session_id="s")  # fmt: skip
    assert too_long.is_error
    assert too_long.structured_content["error"]["message"] == (
        "content and outcome together are 100021 characters; the limit is 100000"
    )
    blank = await tools.memory_add_experience(content="x", outcome=" ", session_id="s")
    assert blank.structured_content["error"]["code"] == "INVALID_ARGUMENT"
    assert len(client.called("create_memory")) == 1


async def test_an_empty_query_lists_the_newest_visible_memories_of_the_tier_up_to_the_limit():
    client = StandInClient()
    client.projects = [memory_pb2.Project(id=1, name="webshop", tenant="t1")]
    key = external_id_for("webshop", "s")
    client.sessions[key] = memory_pb2.Session(id=5, external_id=key, project_id=1)
    rows = [memory_row(i, memory_pb2.TIER_SESSION, session_id=5) for i in range(1, 5)]
    rows.insert(2, memory_row(9, memory_pb2.TIER_LONGTERM))
    page_2 = memory_pb2.ListMemoriesResponse(memories=rows[3:])
    client.answers["list_memories"] = {
        "": view(memory_pb2.ListMemoriesResponse(memories=rows[:3], next_page_token="p2")),
        "p2": view(page_2),
    }
    answer = payload(await tools_on(client).memory_query(query=" ", tier="session", limit=2,
                                                         session_id="s"))  # fmt: skip
    assert [m["id"] for m in answer["memories"]] == [4, 3]
    assert (answer["count"], answer["total"], answer["more_may_exist"]) == (2, 4, True)
    assert all(m["own_session"] for m in answer["memories"])
    scope = client.called("list_memories")[0]["scope"]
    assert (scope.project_id, scope.session_id, scope.include_archived) == (1, 5, False)
    archived = payload(await tools_on(client).memory_query(query="", tier="archive",
                                                           session_id="s"))  # fmt: skip
    assert client.called("list_memories")[-1]["scope"].include_archived is True
    assert archived["memories"] == [] and "empty_reason" not in archived


async def test_a_search_with_a_tier_reads_the_widest_page_and_filters_it():
    client = StandInClient()
    hits = [
        memory_pb2.MemoryHit(memory=memory_row(1, memory_pb2.TIER_LONGTERM), score=0.91234),
        memory_pb2.MemoryHit(memory=memory_row(2, memory_pb2.TIER_SESSION), score=0.8),
        memory_pb2.MemoryHit(memory=memory_row(3, memory_pb2.TIER_LONGTERM), score=0.7),
    ]
    client.answers["search_memories"] = Stream(hits)
    tools = tools_on(client)
    answer = payload(await tools.memory_query(query="db", tier="longterm", limit=1,
                                              session_id="s"))  # fmt: skip
    assert client.called("search_memories")[0]["limit"] == 100
    assert [(m["id"], m["score"]) for m in answer["memories"]] == [(1, 0.9123)]
    assert answer["more_may_exist"] is True  # two longterm matched, one shown
    plain = payload(await tools.memory_query(query="db", limit=3, session_id="s"))
    assert client.called("search_memories")[-1]["limit"] == 3
    assert plain["count"] == 3 and plain["more_may_exist"] is True  # stopped at its limit
    client.answers["search_memories"] = Stream([], {EMPTY_REASON_KEY: "NO_MATCH: nothing"})
    none = payload(await tools.memory_query(query="zzz", session_id="s"))
    assert none == {"memories": [], "count": 0, "more_may_exist": False, "session_id": "s",
                    "empty_reason": "NO_MATCH: nothing"}  # fmt: skip


async def test_the_context_gives_each_tier_its_newest_with_totals_and_the_latest_summary():
    client = StandInClient()
    client.projects = [memory_pb2.Project(id=1, name="webshop", tenant="t1")]
    key = external_id_for("webshop", "s")
    client.sessions[key] = memory_pb2.Session(id=5, external_id=key, project_id=1)
    longterm = [memory_row(i, memory_pb2.TIER_LONGTERM) for i in range(1, 23)]
    task = [memory_row(100, memory_pb2.TIER_TASK, session_id=5)]
    client.memories = longterm + task
    first = summary_pb2.Summary(id=1, content="old")
    latest = summary_pb2.Summary(id=2, content="new", episode_count=4)
    latest.create_time.FromSeconds(1_700_000_000)
    client.answers["list_summaries"] = summary_pb2.ListSummariesResponse(summaries=[first, latest])
    client.answers["list_episodes"] = memory_pb2.ListEpisodesResponse(
        episodes=[memory_pb2.Episode(id=8, session_id=5, user_message="hi")], next_page_token="n"
    )
    answer = payload(await tools_on(client).memory_get_context(session_id="s"))
    groups = answer["memories"]
    assert [m["id"] for m in groups["longterm"]["memories"]] == list(range(22, 2, -1))
    assert (groups["longterm"]["total"], groups["longterm"]["more_may_exist"]) == (22, True)
    assert groups["task"]["total"] == 1 and groups["task"]["memories"][0]["own_session"]
    assert groups["session"] == {"memories": [], "total": 0, "more_may_exist": False}
    assert answer["summary"] == {
        "id": 2, "content": "new", "first_episode_id": 0, "last_episode_id": 0,
        "episode_count": 4, "update_time": "2023-11-14T22:13:20Z",
    }  # fmt: skip
    assert client.called("list_episodes")[0] == {"session_id": 5, "page_size": 5}
    assert answer["recent_exchanges"] == [{
        "id": 8, "session_id": 5, "user_message": "hi", "ai_response": "",
        "occur_time": None, "indexed": "pending",
    }]  # fmt: skip
    assert answer["more_exchanges"] is True and answer["session_exists"] is True


async def test_a_selection_ranks_with_relevance_and_category_and_says_its_method():
    client = StandInClient()
    selected = memory_pb2.SelectedMemory(
        memory=memory_row(1, memory_pb2.TIER_LONGTERM), relevance=0.87654,
        category=memory_pb2.MEMORY_CATEGORY_NECESSARY, previously_used=True,
        method="semantic", degraded_reason="no model",
    )  # fmt: skip
    client.answers["select_memories"] = Stream([selected], {SELECTION_METHOD_KEY: "llm"})
    tools = tools_on(client)
    answer = payload(await tools.memory_select(prompt="fix db", limit=1, session_id="s"))
    asked = client.called("select_memories")[0]
    assert asked["thread_id"] == external_id_for("webshop", "s") and asked["timeout"] == 300.0
    shown = answer["memories"][0]
    assert (shown["id"], shown["relevance"], shown["category"], shown["previously_used"]) == (
        1, 0.8765, "necessary", True,
    )  # fmt: skip
    assert (answer["count"], answer["more_may_exist"]) == (1, True)
    assert (answer["method"], answer["degraded_reason"]) == ("llm", "no model")
    # No trailer: the method the first selected memory carries; none selected: empty.
    client.answers["select_memories"] = Stream([selected])
    assert payload(await tools.memory_select(prompt="x", session_id="s"))["method"] == "semantic"
    client.answers["select_memories"] = Stream([], {EMPTY_REASON_KEY: "NOTHING_STORED: none"})
    empty = payload(await tools.memory_select(prompt="x", session_id="s"))
    assert (empty["method"], empty["degraded_reason"]) == ("", "")
    assert empty["empty_reason"] == "NOTHING_STORED: none"


async def test_only_a_memory_this_project_and_agent_can_see_is_forgotten():
    client = StandInClient()
    client.projects = [memory_pb2.Project(id=1, name="webshop", tenant="t1")]
    tools = tools_on(client, agent="bot")
    client.answers["get_memory"] = memory_row(7, memory_pb2.TIER_LONGTERM, agent_id="bot")
    answer = payload(await tools.memory_forget(memory_id=7, session_id="s"))
    assert answer["forgotten"]["id"] == 7
    assert client.called("delete_memory") == [{"id": 7, "user_id": "", "session_id": 0}]
    user_memory = memory_row(8, memory_pb2.TIER_LONGTERM, agent_id="bot")
    user_memory.kind, user_memory.project_id = memory_pb2.MEMORY_KIND_USER, 0
    client.answers["get_memory"] = user_memory
    assert not (await tools.memory_forget(memory_id=8, session_id="s")).is_error
    for other in (
        memory_row(9, memory_pb2.TIER_LONGTERM, agent_id="bot"),  # another project
        memory_row(10, memory_pb2.TIER_LONGTERM, agent_id="other"),  # another agent
    ):
        if other.id == 9:
            other.project_id = 2
        client.answers["get_memory"] = other
        result = await tools.memory_forget(memory_id=other.id, session_id="s")
        assert result.structured_content["error"] == {
            "code": "NOT_FOUND",
            "message": f"memory {other.id} is not one this session of project 'webshop' can see",
        }
    assert len(client.called("delete_memory")) == 2


# --- conversations and the graph -------------------------------------------------------


async def test_a_conversation_search_keeps_its_window_mode_and_answers_each_hit_whole():
    client = StandInClient()
    hit = memory_pb2.SearchHit(
        episode=memory_pb2.Episode(id=3, session_id=5, user_message="pg",
                                   embedding_state=memory_pb2.JOB_STATE_DONE),
        score=0.123456, snippet="[pg]",
        sources=[memory_pb2.SEARCH_SOURCE_KEYWORD, memory_pb2.SEARCH_SOURCE_SEMANTIC],
    )  # fmt: skip
    client.answers["search_episodes"] = Stream([hit])
    answer = payload(await tools_on(client).memory_search_conversation(query="pg", mode="keyword",
                                                                       limit=1))  # fmt: skip
    asked = client.called("search_episodes")[0]
    assert (asked["project_id"], asked["mode"], asked["limit"]) == (
        1, memory_pb2.SEARCH_MODE_KEYWORD, 1,
    )  # fmt: skip
    assert asked["start_time"] is None and asked["end_time"] is None
    assert answer == {
        "hits": [{
            "score": 0.1235, "snippet": "[pg]", "sources": ["keyword", "semantic"],
            "exchange": {"id": 3, "session_id": 5, "user_message": "pg", "ai_response": "",
                         "occur_time": None, "indexed": "done"},
        }],
        "count": 1, "more_may_exist": True,
    }  # fmt: skip


async def test_an_entity_of_another_project_is_as_absent_as_one_that_does_not_exist():
    client = StandInClient()
    client.projects = [memory_pb2.Project(id=1, name="webshop", tenant="t1")]
    client.answers["get_entity"] = graph_pb2.Entity(id=4, project_id=2, name="X")
    result = await tools_on(client).memory_get_neighborhood(entity_id=4)
    assert result.structured_content["error"]["code"] == "NOT_FOUND"
    assert result.structured_content["error"]["message"] == "entity 4 is not in project 'webshop'"
    assert client.called("get_neighborhood") == []


async def test_a_neighborhood_names_the_ends_of_each_relationship():
    client = StandInClient()
    client.projects = [memory_pb2.Project(id=1, name="webshop", tenant="t1")]
    client.answers["get_entity"] = graph_pb2.Entity(id=4, project_id=1, name="Ann", type="person")
    client.answers["get_neighborhood"] = graph_pb2.Subgraph(
        nodes=[graph_pb2.Entity(id=4, name="Ann"), graph_pb2.Entity(id=5, name="Postgres")],
        edges=[graph_pb2.Relationship(id=1, from_id=4, to_id=5, label="uses"),
               graph_pb2.Relationship(id=2, from_id=4, to_id=6, label="knows")],
    )  # fmt: skip
    answer = payload(await tools_on(client).memory_get_neighborhood(entity_id=4, depth=2))
    assert client.called("get_neighborhood") == [{"entity_id": 4, "depth": 2}]
    assert [(e["label"], e["from"], e["to"]) for e in answer["relationships"]] == [
        ("uses", "Ann", "Postgres"), ("knows", "Ann", None),
    ]  # fmt: skip
    assert answer["entity"]["type"] == "person" and len(answer["entities"]) == 2


# --- failures --------------------------------------------------------------------------


async def test_a_failed_call_is_a_tool_error_with_its_status_and_the_sessions_are_looked_up_again():
    client = StandInClient()
    tools = tools_on(client)
    payload(await tools.memory_add_fact(content="a", session_id="s"))
    client.fail["create_memory"] = refused(grpc.StatusCode.FAILED_PRECONDITION, "session gone")
    result = await tools.memory_add_fact(content="b", session_id="s")
    assert result.is_error
    assert result.content[0].text == "FAILED_PRECONDITION: session gone (request id req-1)"
    assert result.structured_content == {
        "error": {"code": "FAILED_PRECONDITION", "message": "session gone", "request_id": "req-1"}
    }
    looks = len(client.called("get_session"))
    payload(await tools.memory_add_fact(content="c", session_id="s"))
    assert len(client.called("get_session")) == looks + 1  # forgotten, so looked up again
    client.fail["create_memory"] = refused(grpc.StatusCode.UNAVAILABLE, "down")
    assert (await tools.memory_add_fact(content="d", session_id="s")).is_error
    payload(await tools.memory_add_fact(content="e", session_id="s"))
    assert len(client.called("get_session")) == looks + 1  # UNAVAILABLE forgets nothing
