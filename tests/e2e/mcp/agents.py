"""Agents for the MCP tests: the real ``nexus-grpc mcp`` as a subprocess, driven by the
``mcp`` SDK's own client, over stdio (as Claude Code spawns it) or streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from tests.support import wait_until

ROOT = Path(__file__).resolve().parents[3]
SERVING = re.compile(r"serving MCP \(streamable HTTP\) on (http://\S+)")


def command(target: str, project: str, *extra: str) -> list[str]:
    return ["-m", "nexus_grpc.cli", "mcp", "--target", target, "--project", project, *extra]


@asynccontextmanager
async def stdio_agent(
    target: str,
    project: str,
    *extra: str,
    env: dict[str, str] | None = None,
    errlog: IO[str] | None = None,
) -> AsyncIterator[Client]:
    """One agent terminal: ``nexus-grpc mcp`` spawned over stdio, and the SDK client on it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=command(target, project, *extra),
        env={"NEXUS_API_KEY": "", **(env or {})},
        cwd=str(ROOT),
    )
    log = errlog if errlog is not None else sys.stderr
    async with Client(stdio_client(params, errlog=log)) as client:
        yield client


class HttpMcp:
    """``nexus-grpc mcp --http 127.0.0.1:0`` as a subprocess; ``url`` once it serves."""

    def __init__(self, target: str, project: str, *extra: str) -> None:
        self.args = [
            sys.executable,
            *command(target, project, "--http", "127.0.0.1:0", *extra),
        ]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.log: list[str] = []

    def _start(self) -> None:
        serving = threading.Event()
        env = {**os.environ, "NEXUS_API_KEY": ""}
        self.proc = subprocess.Popen(
            self.args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
            cwd=ROOT, env=env,
        )  # fmt: skip

        def pump(proc: subprocess.Popen[str]) -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                self.log.append(line)
                found = SERVING.search(line)
                if found:
                    self.url = found.group(1)
                    serving.set()
            serving.set()  # it exited: stop waiting

        threading.Thread(target=pump, args=(self.proc,), daemon=True).start()
        serving.wait(60)
        assert self.url, "nexus-grpc mcp --http did not start:\n" + "".join(self.log)

    async def __aenter__(self) -> HttpMcp:
        await asyncio.to_thread(self._start)
        return self

    def client(self, mode: str = "auto") -> Client:
        """An SDK client on the server (``mode="legacy"``: the handshake-era protocol)."""
        return Client(self.url, mode=mode)

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        await asyncio.to_thread(self.proc.wait, 30)


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """The tool's structured answer; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}({arguments}) failed: {text(result)}"
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, code: str, **arguments: Any) -> str:
    """The message of a tool error that carries ``code``."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments}) was not refused: {text(result)}"
    assert text(result).startswith(f"{code}: "), text(result)
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert error["code"] == code
    return str(error["message"])


def text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def contents(answer: dict[str, Any], key: str = "memories") -> list[str]:
    return [m["content"] for m in answer[key]]


async def indexed(harness: Any) -> None:
    """Returns once no index job is waiting: a search then sees every write before it
    (the vector index is filled by background jobs)."""

    def pending(conn: Any) -> int:
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM jobs WHERE kind LIKE 'index:%'"
                " AND state IN ('pending', 'running')"
            ).fetchone()[0]
        )

    async def idle() -> bool:
        return await harness.app.db.read_sql(pending) == 0

    await wait_until(idle, timeout=60)
