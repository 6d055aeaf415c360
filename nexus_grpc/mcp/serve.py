"""``nexus-grpc mcp``: the MCP server, over stdio (the default) or streamable HTTP.

stdio is for agents that spawn the server (Claude Code, Cursor, Codex...):
stdout then carries the protocol alone, so everything this process says
goes to stderr.  ``--http HOST:PORT`` serves streamable HTTP at ``/mcp`` for
clients that connect to a URL; it binds loopback unless told otherwise, and
prints the address it bound (``--http 127.0.0.1:0`` picks a free port).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys
from collections.abc import Awaitable
from importlib import metadata
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from pydantic import ValidationError

from nexus_grpc.client import NexusClient
from nexus_grpc.listen_address import ListenAddress
from nexus_grpc.mcp import results
from nexus_grpc.mcp.results import ToolFailure
from nexus_grpc.mcp.stdio_pipes import pipe_streams
from nexus_grpc.mcp.tools import MemoryTools, connection_session_id
from nexus_grpc.mcp.workspace import Workspace, WorkspaceOptions

__all__ = ["MemoryServer", "build_server", "run"]

INSTRUCTIONS = """\
Memory for coding agents, shared by every agent session of one project.

Call memory_get_context when a session starts or resumes. Pass the same session_id
(your agent session's id) to every call of one session. Tiers: task and session
memories are seen only by the session that stored them; longterm memories by every
session of the project; archive only when asked for by tier. Store what another
session (or you, tomorrow) should know as longterm; what only this task needs as task.
Tool errors start with a gRPC status: INVALID_ARGUMENT means fix the call,
NOT_FOUND that the id is not one this session can see, UNAVAILABLE to try later.
"""

PATH = "/mcp"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _version() -> str:
    try:
        return metadata.version("nexus-grpc")
    except metadata.PackageNotFoundError:
        return "0"


class MemoryServer(MCPServer):
    """The SDK's server, refusing bad arguments as INVALID_ARGUMENT before a tool runs.

    The SDK checks arguments against each tool's schema, but ignores names the
    schema does not have and words its refusals its own way.  Here a misspelt
    argument is refused (a ``sesion_id`` taken as absent would act in another
    session), and every refusal reads like the server's: ``INVALID_ARGUMENT:
    limit: Input should be less than or equal to 100``.
    """

    def __init__(self, tools: MemoryTools, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tools = tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> Any:
        allowed = self.tools.parameters(name)
        if allowed is not None:
            unknown = sorted(set(arguments) - allowed)
            if unknown:
                return results.failure(
                    ToolFailure(
                        "INVALID_ARGUMENT",
                        f"{name} takes no argument {', '.join(repr(u) for u in unknown)};"
                        f" its arguments are: {', '.join(sorted(allowed))}",
                    )
                )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return results.failure(ToolFailure("INVALID_ARGUMENT", _refusal(exc.__cause__)))
            raise


def _refusal(error: ValidationError) -> str:
    """What was wrong with each argument, without echoing the values (they may be long)."""
    parts = []
    for problem in error.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)


def build_server(
    client: NexusClient, options: WorkspaceOptions, *, connection_session: str = ""
) -> MemoryServer:
    """The MCP server with every tool registered, acting through ``client``."""
    tools = MemoryTools(client, Workspace(client, options), connection_session=connection_session)
    server = MemoryServer(
        tools,
        name="nexus-grpc",
        title="nexus-grpc memory",
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level="WARNING",
    )
    for spec in tools.specs():
        server.add_tool(
            spec.fn, name=spec.name, title=spec.title, annotations=spec.annotations,
            structured_output=False,
        )  # fmt: skip
    return server


async def _serve_stdio(server: MemoryServer) -> None:
    """``MCPServer.run_stdio_async``, on streams that do not go through worker threads."""
    async with pipe_streams() as streams:
        stdin, stdout = streams if streams is not None else (None, None)
        async with stdio_server(stdin, stdout) as (read_stream, write_stream):
            # The SDK's own stdio runner does exactly this; it takes no streams.
            lowlevel = server._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


async def _serve_http(server: MCPServer, address: ListenAddress) -> None:
    import uvicorn

    if address.host not in LOOPBACK:
        print(
            f"nexus-grpc mcp: serving on {address.host}, beyond this machine: anyone who"
            " reaches it acts with this server's API key (the MCP endpoint has no"
            " authentication of its own)",
            file=sys.stderr,
        )
    # Bind first, so port 0 works and the address printed is the one bound.
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it the last piece of each answer
    # waits for the client's delayed ACK (40 ms) on a kept-alive connection.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((address.host, address.port))
    sock.listen(128)
    sock.setblocking(False)
    port = sock.getsockname()[1]
    app = server.streamable_http_app(streamable_http_path=PATH, host=address.host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    host = f"[{address.host}]" if family == socket.AF_INET6 else address.host
    print(
        f"nexus-grpc mcp: serving MCP (streamable HTTP) on http://{host}:{port}{PATH}",
        file=sys.stderr,
        flush=True,
    )
    await uvicorn.Server(config).serve(sockets=[sock])


async def _closing(client: NexusClient, serving: Awaitable[None]) -> None:
    try:
        await serving
    finally:
        await client.close()


def run(args: argparse.Namespace, client: NexusClient) -> int:
    """Serves until the client hangs up (stdio) or the process is stopped (HTTP)."""
    options = WorkspaceOptions(
        project=args.project, session=args.session, user=args.user, agent=args.agent
    )
    if args.http is None:
        server = build_server(client, options, connection_session=connection_session_id())
        asyncio.run(_closing(client, _serve_stdio(server)))
        return 0
    server = build_server(client, options)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_closing(client, _serve_http(server, args.http)))
    return 0
