"""The OpenAI Agents SDK over MCP: docs/examples/openai_agents_mcp.py's agent, its MCP
server spawned by the SDK's own MCPServerStdio (the real `nexus-grpc mcp` in front of a
real server), run by the SDK's Runner with a scripted model (no network)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from agents import Model, ModelResponse, Runner, Usage, set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.e2e.frameworks.conftest import all_memories, indexed, project_named
from tests.e2e.mcp.agents import ROOT


def _example():
    """The example as the docs ship it (docs/examples/ is no package)."""
    path = Path(__file__).resolve().parents[3] / "docs" / "examples" / "openai_agents_mcp.py"
    spec = importlib.util.spec_from_file_location("openai_agents_mcp", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_EXAMPLE = _example()
memory_agent, nexus_mcp = _EXAMPLE.memory_agent, _EXAMPLE.nexus_mcp

set_tracing_disabled(True)  # the SDK would otherwise send traces to OpenAI


def tool_call(n: int, name: str, **arguments: Any) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call",
        id=f"fc_{n}",
        call_id=f"call_{n}",
        name=name,
        arguments=json.dumps(arguments),
        status="completed",
    )


def message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class ScriptedModel(Model):
    """Answers each turn with the next scripted step: a step is a function of the turn's
    input items (which hold the tool results) returning the model's output items."""

    def __init__(self, *steps) -> None:
        self.steps = list(steps)
        self.tools: list[str] = []
        self.instructions: list[str | None] = []

    async def get_response(self, system_instructions, input, model_settings, tools, *a, **kw):
        self.tools = [t.name for t in tools]
        self.instructions.append(system_instructions)
        step = self.steps.pop(0)
        return ModelResponse(output=step(input), usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # pragma: no cover - Runner.run is not streamed
        raise NotImplementedError


def tool_output(items: list, call_id: str) -> str:
    [found] = [i for i in items if isinstance(i, dict) and i.get("call_id") == call_id
               and i.get("type") == "function_call_output"]  # fmt: skip
    output = found["output"]
    if isinstance(output, str):
        try:
            output = json.loads(output)
        except ValueError:
            return output
    # The SDK hands an MCP tool's result over as its content blocks: the text is nexus's JSON.
    if isinstance(output, list):
        return "".join(block.get("text", "") for block in output)
    return json.dumps(output)


def server_for(harness, user: str):
    return nexus_mcp(
        harness.target,
        "coffee",
        user,
        command=(sys.executable, "-m", "nexus_grpc.cli"),
        env={"NEXUS_API_KEY": "", "PYTHONPATH": str(ROOT)},
    )


async def test_an_agent_stores_a_fact_through_mcp_and_recalls_it_in_a_later_run(harness, client):
    said = "Remember that I take my coffee black, no sugar."
    storing = ScriptedModel(
        lambda _: [
            tool_call(
                1,
                "memory_add_fact",
                content="Alice takes her coffee black, no sugar",
                tier="longterm",
            )
        ],  # fmt: skip
        lambda items: [message("Stored: " + tool_output(items, "call_1"))],
    )
    async with server_for(harness, "alice") as server:
        first = await Runner.run(memory_agent(server, storing), said)
    assert "memory_add_fact" in storing.tools and "memory_query" in storing.tools
    assert first.final_output.startswith("Stored: ")
    stored = json.loads(first.final_output.removeprefix("Stored: "))
    assert stored["memory"]["content"] == "Alice takes her coffee black, no sugar"

    # It is a nexus memory of the project, for alice.
    project = await project_named(client, "coffee")
    [memory] = await all_memories(client, project.id, "alice")
    assert memory.content == "Alice takes her coffee black, no sugar"
    assert memory.tier == memory_pb2.TIER_LONGTERM
    await indexed(harness)

    # A later run (a new MCP server process, a new agent) finds it.
    recalling = ScriptedModel(
        lambda _: [tool_call(2, "memory_query", query="how does alice take her coffee")],
        lambda items: [message(tool_output(items, "call_2"))],
    )
    async with server_for(harness, "alice") as server:
        later = await Runner.run(memory_agent(server, recalling), "How do I take my coffee?")
    found = json.loads(later.final_output)
    assert [m["content"] for m in found["memories"]] == ["Alice takes her coffee black, no sugar"]


async def test_a_refused_tool_call_reaches_the_model_as_the_servers_message(harness, client):
    refusing = ScriptedModel(
        lambda _: [tool_call(1, "memory_forget", memory_id=999999)],
        lambda items: [message(tool_output(items, "call_1"))],
    )
    async with server_for(harness, "alice") as server:
        result = await Runner.run(memory_agent(server, refusing), "Forget memory 999999")
    assert "NOT_FOUND" in result.final_output and "999999" in result.final_output
