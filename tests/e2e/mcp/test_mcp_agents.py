"""`nexus-grpc mcp` as agents use it: the real command as a subprocess, in front of a real
server, driven by the `mcp` SDK's own client over stdio and over streamable HTTP.
(The command's flags, parsed without a subprocess: tests/unit/test_mcp_options.py; the
tools' argument bounds and checks, called without the SDK's transport:
tests/unit/test_mcp_arguments.py; each tool's calls, answers and rules on a stand-in
client (another project's session or entity, tier filtering, limits met, failures as
tool errors, the project found by name): tests/unit/test_mcp_tools_answers.py.)"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.mcp.workspace import external_id_for
from tests.e2e.mcp.agents import HttpMcp, contents, indexed, ok, refused, stdio_agent, text

SEED_004 = {
    "memory_add_fact": {"content", "tier", "session_id"},
    "memory_add_experience": {"content", "outcome", "session_id"},
    "memory_query": {"query", "tier", "session_id", "limit"},
    "memory_get_context": {"session_id"},
}
TOOLS = {
    *SEED_004,
    "memory_add_exchange",
    "memory_search_conversation",
    "memory_select",
    "memory_search_entities",
    "memory_get_neighborhood",
    "memory_get_summary",
    "memory_forget",
}
READ_ONLY = {
    "memory_query",
    "memory_get_context",
    "memory_search_conversation",
    "memory_search_entities",
    "memory_get_neighborhood",
    "memory_get_summary",
}


@pytest.fixture
async def client(harness):
    async with NexusClient(harness.target, retry=None) as c:
        yield c


async def project_named(client: NexusClient, name: str) -> memory_pb2.Project:
    page = await client.list_projects(page_size=1000)
    [project] = [p for p in page.projects if p.name == name]
    return project


async def test_tools_are_listed_with_schemas_and_descriptions_an_agent_can_follow(harness):
    async with stdio_agent(harness.target, "listing") as agent:
        listed = {tool.name: tool for tool in (await agent.list_tools()).tools}
    assert set(listed) == TOOLS
    for name, arguments in SEED_004.items():
        # The tools' names and arguments, exactly as agents call them.
        assert set(listed[name].input_schema["properties"]) == arguments, name
    assert listed["memory_add_fact"].input_schema["required"] == ["content"]
    assert listed["memory_add_experience"].input_schema["required"] == ["content", "outcome"]
    assert listed["memory_query"].input_schema["required"] == ["query"]
    assert "required" not in listed["memory_get_context"].input_schema
    tier = listed["memory_add_fact"].input_schema["properties"]["tier"]
    assert tier["enum"] == ["task", "session", "longterm", "archive"]
    assert tier["default"] == "session"
    limit = listed["memory_query"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 100, 10)
    for tool in listed.values():
        assert len(tool.description or "") > 60, tool.name
        for argument, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{tool.name}.{argument} has no description"
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (tool.name in READ_ONLY), tool.name
    assert listed["memory_forget"].annotations.destructive_hint is True


async def test_two_agent_sessions_on_one_project_keep_task_memory_apart_and_share_longterm(
    harness, client
):
    """Session isolation: two terminals on one project. One session's task and session memories are
    invisible to the other; longterm memories are visible to both; archive only by tier."""
    async with (
        stdio_agent(harness.target, "shop") as auth_terminal,
        stdio_agent(harness.target, "shop") as billing_terminal,
    ):
        a = {"session_id": "auth-work"}
        b = {"session_id": "billing-work"}
        task = await ok(
            auth_terminal, "memory_add_fact",
            content="Working on JWT authentication in the login handler", tier="task", **a,
        )  # fmt: skip
        await ok(
            auth_terminal, "memory_add_fact",
            content="JWT refresh tokens last seven days", tier="session", **a,
        )  # fmt: skip
        await ok(
            auth_terminal, "memory_add_fact",
            content="PostgreSQL runs on port 5432", tier="longterm", **a,
        )  # fmt: skip
        await ok(
            auth_terminal, "memory_add_fact",
            content="The JWT library was MD5-signed in 2019", tier="archive", **a,
        )  # fmt: skip
        assert task["memory"]["tier"] == "task" and task["memory"]["own_session"] is True
        await indexed(harness)

        mine = await ok(auth_terminal, "memory_query", query="JWT authentication port", **a)
        assert set(contents(mine)) == {
            "Working on JWT authentication in the login handler",
            "JWT refresh tokens last seven days",
            "PostgreSQL runs on port 5432",
        }
        theirs = await ok(billing_terminal, "memory_query", query="JWT authentication port", **b)
        assert contents(theirs) == ["PostgreSQL runs on port 5432"]
        assert theirs["memories"][0]["own_session"] is False

        # Asking by tier never reaches past the session either.
        for tier in ("task", "session"):
            other = await ok(billing_terminal, "memory_query", query="JWT", tier=tier, **b)
            assert other["memories"] == [] and other["more_may_exist"] is False
            listed = await ok(billing_terminal, "memory_query", query="", tier=tier, **b)
            assert listed["memories"] == [] and listed["total"] == 0
        archived = await ok(billing_terminal, "memory_query", query="JWT", tier="archive", **b)
        assert contents(archived) == ["The JWT library was MD5-signed in 2019"]

        context = await ok(billing_terminal, "memory_get_context", **b)
        assert context["session_exists"] is False  # it has written nothing yet
        assert context["memories"]["task"]["total"] == 0
        assert context["memories"]["session"]["total"] == 0
        assert contents(context["memories"]["longterm"]) == ["PostgreSQL runs on port 5432"]
        own = await ok(auth_terminal, "memory_get_context", **a)
        assert contents(own["memories"]["task"]) == [
            "Working on JWT authentication in the login handler"
        ]
        assert contents(own["memories"]["session"]) == ["JWT refresh tokens last seven days"]

        # The other terminal cannot forget what it cannot see; the memory stays.
        message = await refused(
            billing_terminal, "memory_forget", "NOT_FOUND", memory_id=task["memory"]["id"], **b
        )
        assert str(task["memory"]["id"]) in message
        still = await ok(auth_terminal, "memory_query", query="", tier="task", **a)
        assert [m["id"] for m in still["memories"]] == [task["memory"]["id"]]

        # Each terminal's own MCP session, when it names none, is a session of its own too.
        await ok(auth_terminal, "memory_add_fact", content="Scratch note for this terminal")
        await indexed(harness)
        own_unnamed = await ok(auth_terminal, "memory_query", query="scratch note terminal")
        assert "Scratch note for this terminal" in contents(own_unnamed)
        unnamed = await ok(billing_terminal, "memory_query", query="scratch note terminal")
        assert "Scratch note for this terminal" not in contents(unnamed)
        assert own_unnamed["session_id"] != unnamed["session_id"]

    # Both terminals wrote into one project, each into its own session.
    project = await project_named(client, "shop")
    sessions = (await client.list_sessions(project_id=project.id)).sessions
    names = {s.name for s in sessions}
    assert {"auth-work"} <= names and "billing-work" not in names  # billing wrote nothing
    stored = await client.get_memory(
        id=task["memory"]["id"],
        session_id=next(s.id for s in sessions if s.name == "auth-work"),
    )
    assert stored.tier == memory_pb2.TIER_TASK and stored.project_id == project.id


async def test_streamable_http_serves_the_same_tools_and_the_same_isolation(harness):
    async with HttpMcp(harness.target, "web") as server:
        async with server.client() as first, server.client() as second:
            assert {t.name for t in (await first.list_tools()).tools} == TOOLS
            await ok(first, "memory_add_fact", content="Deploys go out on Tuesdays",
                     tier="task", session_id="deploy")  # fmt: skip
            await ok(first, "memory_add_fact", content="Staging lives at staging.lan",
                     tier="longterm", session_id="deploy")  # fmt: skip
            await indexed(harness)
            seen = await ok(second, "memory_query", query="deploys staging",
                            session_id="docs")  # fmt: skip
            assert contents(seen) == ["Staging lives at staging.lan"]
            # This protocol version has no MCP session to stand in for session_id.
            message = await refused(first, "memory_query", "INVALID_ARGUMENT", query="deploys")
            assert "session_id is required" in message
        # An older client's HTTP session (Mcp-Session-Id) is its agent session.
        async with server.client(mode="legacy") as old, server.client(mode="legacy") as other:
            await ok(old, "memory_add_fact", content="Legacy clients keep their own task",
                     tier="task")  # fmt: skip
            await indexed(harness)
            mine = await ok(old, "memory_query", query="legacy clients task", tier="task")
            assert contents(mine) == ["Legacy clients keep their own task"]
            theirs = await ok(other, "memory_query", query="legacy clients task", tier="task")
            assert contents(theirs) == []


async def test_every_tool_answers_its_good_arguments(harness, client):
    session = {"session_id": "feature-x"}
    async with stdio_agent(harness.target, "tools", "--user", "alice") as agent:
        fact = await ok(agent, "memory_add_fact", content="Use ruff for linting\nIt is fast",
                        tier="longterm", **session)  # fmt: skip
        assert fact["memory"]["title"] == "Use ruff for linting"
        assert fact["memory"]["type"] == "fact" and fact["session_id"] == "feature-x"

        experience = await ok(
            agent, "memory_add_experience", content="Ran the migrations before the tests",
            outcome="The suite passed; do it first next time", **session,
        )  # fmt: skip
        assert experience["memory"]["type"] == "experience"
        assert experience["memory"]["tier"] == "session"
        assert experience["memory"]["outcome"] == "The suite passed; do it first next time"
        await indexed(harness)

        found = await ok(agent, "memory_query", query="migrations tests", limit=1, **session)
        assert found["count"] == 1 and found["more_may_exist"] is True
        assert found["memories"][0]["outcome"] == "The suite passed; do it first next time"

        earlier = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
        exchange = await ok(
            agent, "memory_add_exchange", user_message="Why does the cache miss on Mondays?",
            ai_response="The weekly flush runs Sunday night.",
            occur_time=earlier.isoformat(), **session,
        )  # fmt: skip
        assert exchange["exchange"]["occur_time"] == "2024-05-01T09:00:00Z"
        await indexed(harness)
        hits = await ok(agent, "memory_search_conversation", query="weekly flush",
                        mode="keyword")  # fmt: skip
        assert [h["exchange"]["id"] for h in hits["hits"]] == [exchange["exchange"]["id"]]
        assert "[flush]" in hits["hits"][0]["snippet"] and hits["more_may_exist"] is False
        outside = await ok(
            agent, "memory_search_conversation", query="weekly flush", mode="keyword",
            start_time=(earlier + timedelta(days=1)).isoformat(),
        )  # fmt: skip
        assert outside["hits"] == []
        inside = await ok(
            agent, "memory_search_conversation", query="weekly flush", mode="keyword",
            start_time=earlier.isoformat(), end_time=(earlier + timedelta(hours=1)).isoformat(),
        )  # fmt: skip
        assert len(inside["hits"]) == 1

        # No LLM here: selection ranks by meaning and says so.
        selected = await ok(agent, "memory_select", prompt="How do I lint the code?", **session)
        assert "Use ruff for linting\nIt is fast" in contents(selected)
        assert selected["method"] == "semantic" and selected["degraded_reason"]
        assert {m["category"] for m in selected["memories"]} <= {"necessary", "supporting"}

        project = await project_named(client, "tools")
        ruff = await client.upsert_entity(name="ruff", type="technology", project_id=project.id)
        python = await client.upsert_entity(name="Python", type="technology", project_id=project.id)
        await client.upsert_relationship(from_id=ruff.id, to_id=python.id, label="lints")
        entities = await ok(agent, "memory_search_entities", query="ruff")
        assert entities["entities"][0]["name"] == "ruff"
        around = await ok(agent, "memory_get_neighborhood", entity_id=ruff.id)
        assert {e["name"] for e in around["entities"]} == {"ruff", "Python"}
        assert [(r["from"], r["label"], r["to"]) for r in around["relationships"]] == [
            ("ruff", "lints", "Python")
        ]

        nexus_session = await client.get_session(external_id=external_id_for("tools", "feature-x"))
        await client.create_summary(
            summary=summary_pb2.Summary(
                session_id=nexus_session.id, content="Linting with ruff; migrations first."
            )
        )
        summary = await ok(agent, "memory_get_summary", **session)
        assert [p["content"] for p in summary["parts"]] == ["Linting with ruff; migrations first."]

        context = await ok(agent, "memory_get_context", **session)
        assert context["summary"]["content"] == "Linting with ruff; migrations first."
        assert [e["id"] for e in context["recent_exchanges"]] == [exchange["exchange"]["id"]]
        assert context["memories"]["longterm"]["total"] == 1

        gone = await ok(agent, "memory_forget", memory_id=fact["memory"]["id"], **session)
        assert gone["forgotten"]["id"] == fact["memory"]["id"]
        after = await ok(agent, "memory_query", query="ruff linting", **session)
        assert fact["memory"]["id"] not in [m["id"] for m in after["memories"]]


# Each bad call, with the words its refusal must contain.
BAD_CALLS = [
    ("memory_add_fact", {}, "content"),
    ("memory_add_fact", {"content": ""}, "content"),
    ("memory_add_fact", {"content": "  \n\t "}, "must not be blank"),
    ("memory_add_fact", {"content": "x", "tier": "forever"}, "tier"),
    ("memory_add_fact", {"content": "x", "tier": "task", "sesion_id": "s"}, "'sesion_id'"),
    ("memory_add_fact", {"content": "x" * 100_001}, "content"),
    ("memory_add_fact", {"content": "x", "session_id": ""}, "session_id"),
    ("memory_add_fact", {"content": "x", "session_id": "a\x1b[2Jb"}, "control characters"),
    ("memory_add_fact", {"content": "x", "session_id": " padded"}, "whitespace"),
    ("memory_add_fact", {"content": "x", "session_id": "s" * 201}, "session_id"),
    ("memory_add_fact", {"content": ["not", "text"]}, "content"),
    ("memory_add_experience", {"content": "tried it"}, "outcome"),
    ("memory_add_experience", {"content": "tried it", "outcome": " "}, "outcome"),
    (
        "memory_add_experience",
        {"content": "x" * 95_000, "outcome": "y" * 9_000},
        "together",
    ),
    ("memory_query", {}, "query"),
    ("memory_query", {"query": "x", "limit": 0}, "limit"),
    ("memory_query", {"query": "x", "limit": 101}, "limit"),
    ("memory_query", {"query": "x", "limit": "many"}, "limit"),
    ("memory_query", {"query": "x", "tier": "TASK"}, "tier"),
    ("memory_query", {"query": "x" * 2_001}, "query"),
    ("memory_get_context", {"session": "s"}, "'session'"),
    ("memory_add_exchange", {"ai_response": "hello"}, "user_message"),
    ("memory_add_exchange", {"user_message": " "}, "must not be blank"),
    (
        "memory_add_exchange",
        {"user_message": "hi", "occur_time": "2024-05-01T09:00:00"},
        "occur_time",
    ),  # fmt: skip
    ("memory_add_exchange", {"user_message": "hi", "occur_time": "yesterday"}, "occur_time"),
    (
        "memory_add_exchange",
        {"user_message": "hi", "occur_time": (datetime.now(UTC) + timedelta(days=1)).isoformat()},
        "in the future",
    ),
    ("memory_search_conversation", {"query": " "}, "must not be blank"),
    ("memory_search_conversation", {"query": "x", "mode": "fuzzy"}, "mode"),
    (
        "memory_search_conversation",
        {"query": "x", "start_time": "2024-05-02T00:00:00Z", "end_time": "2024-05-01T00:00:00Z"},
        "earlier than end_time",
    ),
    ("memory_search_conversation", {"query": "x", "session_id": "s"}, "'session_id'"),
    ("memory_select", {"prompt": ""}, "prompt"),
    ("memory_select", {"prompt": "x" * 10_001}, "prompt"),
    ("memory_select", {"prompt": "x", "thread_summary": "y" * 10_001}, "thread_summary"),
    ("memory_search_entities", {"query": "\u200b"}, "must not be blank"),
    ("memory_search_entities", {"query": "x", "limit": -1}, "limit"),
    ("memory_get_neighborhood", {"entity_id": 0}, "entity_id"),
    ("memory_get_neighborhood", {"entity_id": 1, "depth": 4}, "depth"),
    ("memory_get_summary", {"session_id": "\n"}, "control characters"),
    ("memory_forget", {}, "memory_id"),
    ("memory_forget", {"memory_id": -3}, "memory_id"),
    ("memory_forget", {"memory_id": "seven"}, "memory_id"),
]


async def test_a_fact_told_twice_is_kept_once_and_empty_answers_say_why(harness, client):
    """A retried memory_add_fact (or the same fact in other case and
    punctuation) answers with the memory already there; searches and
    selections that find nothing say why, and selection always its method."""
    session = {"session_id": "retry"}
    async with stdio_agent(harness.target, "twice") as agent:
        empty = await ok(agent, "memory_query", query="", **session)
        assert empty["memories"] == [] and empty["empty_reason"].startswith("NOTHING_STORED")
        chosen = await ok(agent, "memory_select", prompt="which port?", **session)
        assert chosen["memories"] == [] and chosen["method"] == "semantic"
        assert chosen["empty_reason"].startswith("NOTHING_STORED")

        first = await ok(agent, "memory_add_fact", content="The database runs on port 5433.",
                         tier="longterm", **session)  # fmt: skip
        again = await ok(agent, "memory_add_fact", content="the database runs on port 5433",
                         tier="longterm", **session)  # fmt: skip
        assert first["already_known"] is False and again["already_known"] is True
        assert again["memory"]["id"] == first["memory"]["id"]
        await indexed(harness)
        listed = await ok(agent, "memory_query", query="", **session)
        assert listed["total"] == 1 and "empty_reason" not in listed
        missed = await ok(agent, "memory_search_conversation", query="zeppelin", mode="keyword")
        assert missed["hits"] == [] and missed["empty_reason"].startswith("NOTHING_STORED")


async def test_every_tool_refuses_bad_arguments_before_any_call_and_writes_nothing(harness, client):
    assert {tool for tool, _, _ in BAD_CALLS} == TOOLS
    async with stdio_agent(harness.target, "refusals") as agent:
        for tool, arguments, words in BAD_CALLS:
            message = await refused(agent, tool, "INVALID_ARGUMENT", **arguments)
            assert words in message, (tool, arguments, message)
    # Refused before any call: not even the project was created.
    assert (await client.list_projects()).projects == []
    assert (await client.list_sessions()).sessions == []


async def test_grpc_failures_reach_the_agent_with_their_status_and_message(harness):
    async with stdio_agent(harness.target, "errors") as agent:
        message = await refused(agent, "memory_forget", "NOT_FOUND", memory_id=987654)
        assert "987654" in message
        await refused(agent, "memory_get_neighborhood", "NOT_FOUND", entity_id=987654)
    async with stdio_agent("127.0.0.1:1", "down") as agent:
        result = await agent.call_tool("memory_query", {"query": "anything", "session_id": "s"})
        assert result.is_error and text(result).startswith("UNAVAILABLE: ")
        assert result.structured_content["error"]["code"] == "UNAVAILABLE"


async def test_a_session_id_of_another_project_is_refused_and_plain_names_are_per_project(
    harness, client
):
    shared = str(uuid.uuid4())
    async with (
        stdio_agent(harness.target, "alpha") as alpha,
        stdio_agent(harness.target, "beta") as beta,
    ):
        await ok(alpha, "memory_add_fact", content="alpha note", session_id=shared)
        message = await refused(beta, "memory_add_fact", "FAILED_PRECONDITION",
                                content="beta note", session_id=shared)  # fmt: skip
        assert "belongs to project" in message and "'beta'" in message
        # The same plain name in two projects is two sessions.
        await ok(alpha, "memory_add_fact", content="alpha main", tier="task", session_id="main")
        await ok(beta, "memory_add_fact", content="beta main", tier="task", session_id="main")
        await indexed(harness)
        seen = await ok(beta, "memory_query", query="main", tier="task", session_id="main")
        assert contents(seen) == ["beta main"]
    # The refused write opened no session in beta: only "main" is there.
    beta_project = await project_named(client, "beta")
    sessions = (await client.list_sessions(project_id=beta_project.id)).sessions
    assert [s.name for s in sessions] == ["main"]
    session = await client.get_session(external_id=shared)
    assert session.project_id == (await project_named(client, "alpha")).id


AUTH_KEY = "mcp-agent-key-0000000000001"


@pytest.fixture
async def auth_harness(tmp_path):
    from tests.support import start_harness

    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": AUTH_KEY, "name": "agents", "users": ["ann"]}]}))
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys))
    yield h
    await h.close()


async def test_the_api_key_comes_from_the_environment_and_refusals_carry_their_status(
    auth_harness,
):
    async with stdio_agent(auth_harness.target, "secured") as anonymous:
        result = await anonymous.call_tool("memory_query", {"query": "x", "session_id": "s"})
        assert text(result).startswith("UNAUTHENTICATED: ")
    env = {"NEXUS_API_KEY": AUTH_KEY}
    async with stdio_agent(auth_harness.target, "secured", "--user", "ann", env=env) as agent:
        stored = await ok(agent, "memory_add_fact", content="ann prefers tabs",
                          tier="longterm", session_id="s")  # fmt: skip
        await indexed(auth_harness)
        found = await ok(agent, "memory_query", query="tabs", session_id="s")
        assert [m["id"] for m in found["memories"]] == [stored["memory"]["id"]]
    async with stdio_agent(auth_harness.target, "secured", "--user", "zed", env=env) as outsider:
        await refused(outsider, "memory_query", "PERMISSION_DENIED", query="tabs", session_id="s")


def test_mcp_needs_a_project(tmp_path):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "nexus_grpc.cli", "mcp", "--target", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2 and "--project" in result.stderr
