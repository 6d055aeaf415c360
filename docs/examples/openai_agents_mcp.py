"""An OpenAI Agents SDK agent whose memory is nexus-grpc, through `nexus-grpc mcp`.

The SDK's own MCP support spawns `nexus-grpc mcp` over stdio and offers its
memory tools (memory_add_fact, memory_query, memory_get_context, ...) to the
agent; nexus keeps what the agent stores per project and user, across runs.

    pip install 'nexus-grpc[mcp]' openai-agents
    export OPENAI_API_KEY=...          # the model's; nexus-grpc needs none
    python docs/examples/openai_agents_mcp.py --target 127.0.0.1:50051 --project demo \
        --user alice "Remember that I take my coffee black."
    python docs/examples/openai_agents_mcp.py --project demo --user alice "How do I take my coffee?"
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from agents import Agent, Model, Runner
from agents.mcp import MCPServerStdio

INSTRUCTIONS = (
    "You are a helpful assistant with a long-term memory. When the user tells you a"
    " lasting fact or preference, store it with memory_add_fact (tier longterm). Before"
    " answering a question about the user, look it up with memory_query."
)


def nexus_mcp(
    target: str,
    project: str,
    user: str,
    *,
    command: Sequence[str] = ("nexus-grpc",),
    env: dict[str, str] | None = None,
) -> MCPServerStdio:
    """`nexus-grpc mcp` for one project and user, as the SDK's stdio MCP server.
    The API key, if the server wants one, comes from NEXUS_API_KEY in ``env``."""
    program, *first = command
    return MCPServerStdio(
        name="nexus-grpc memory",
        params={
            "command": program,
            "args": [*first, "mcp", "--target", target, "--project", project, "--user", user],
            **({"env": env} if env is not None else {}),
        },
        cache_tools_list=True,
        client_session_timeout_seconds=30,
    )


def memory_agent(server: MCPServerStdio, model: str | Model = "gpt-4.1-mini") -> Agent:
    return Agent(name="assistant", instructions=INSTRUCTIONS, mcp_servers=[server], model=model)


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("message")
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--project", default="demo")
    parser.add_argument("--user", default="alice")
    args = parser.parse_args(argv)
    async with nexus_mcp(args.target, args.project, args.user) as server:
        result = await Runner.run(memory_agent(server), args.message)
        print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
