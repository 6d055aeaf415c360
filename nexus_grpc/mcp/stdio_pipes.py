"""stdin and stdout as non-blocking pipes for the MCP stdio transport.

The SDK's ``stdio_server`` reads and writes the standard streams through
``anyio.wrap_file``: every line read, every write and every flush is a trip
to a worker thread and back, three per tool call.  On a busy machine those
trips were most of a tool call's overhead (docs/benchmarks.md), so when stdin
and stdout are pipes or sockets (as when an agent spawns us) they are read and
written on the event loop itself, and handed to ``stdio_server`` as the
streams it accepts.

As the SDK does, the protocol gets private duplicates of fds 0 and 1, and the
standard descriptors are pointed elsewhere (stdin at the null device, stdout
at stderr), so nothing printed by accident can corrupt the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["pipe_streams"]

#: The longest message line accepted: tool arguments may carry 100,000
#: characters, which JSON escaping can multiply.
MAX_LINE_BYTES = 64 * 1024 * 1024


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _Lines:
    """``async for line in`` over a pipe, as ``stdio_server`` reads its stdin."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Writer:
    """``write`` and ``flush``, as ``stdio_server`` writes its stdout."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@contextlib.asynccontextmanager
async def pipe_streams() -> AsyncIterator[tuple[Any, Any] | None]:
    """The protocol's stdin and stdout on the event loop; None where they are not both
    pipes or sockets (a terminal, a file): then the SDK's own streams serve."""
    if not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0)
        )
        write_transport, write_protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
        )
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        try:
            yield _Lines(reader), _Writer(writer)
        finally:
            read_transport.close()
            write_transport.close()
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
