"""What the framework adapters cost on top of the typed client's calls they make
(``nexus_grpc.integrations``).

One real server (``nexus-grpc serve``, its defaults); each adapter and the typed
client it wraps run in this process, on one client. Each pair (the adapter's
call and the typed client's call(s) it makes) is timed back to back, in
alternating order, so both see the same machine; the overhead is the median of
the pairs' differences (target: under 1 ms). The adapter's calls are the ones
an application makes every turn, warmed (the project resolved, a key's memory
id known):

- LangGraph ``NexusStore.aget`` against ``GetMemory``; ``aput`` of a changed
  value against ``UpdateMemory``; ``asearch`` with a query against
  ``SearchMemories`` (100 candidates, as the store asks); ``get`` (the sync API,
  from a thread, over the adapter's own loop) against ``GetMemory``;
- LangChain ``NexusRetriever.ainvoke`` against ``SearchMemories`` (k=4);
  ``NexusChatMessageHistory.aget_messages`` against ``GetSession`` +
  ``ListEpisodes``;
- LlamaIndex ``NexusRetriever.aretrieve`` against ``SearchMemories``;
  ``NexusMemoryBlock.aget`` against ``SelectMemories`` (no LLM: the semantic
  ranking).

    .venv/bin/python -m bench.integrations_overhead [--pairs 300] [--append docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations.langchain import NexusChatMessageHistory
from nexus_grpc.integrations.langchain import NexusRetriever as LangChainRetriever
from nexus_grpc.integrations.langgraph import NexusStore
from nexus_grpc.integrations.llamaindex import NexusMemoryBlock
from nexus_grpc.integrations.llamaindex import NexusRetriever as LlamaIndexRetriever
from nexus_grpc.loadtest.launcher import ServerProcess

PROJECT = "bench-integrations"
USER = "bench-user"
NAMESPACE = ("memories", USER)
QUERY = "which port does the database listen on"
FACTS = [
    "The database listens on port 5432",
    "Deploys go out on Tuesdays after the standup",
    "The user prefers dark mode in every editor",
    "Backups run nightly at 02:00 UTC",
    "The staging cluster has three nodes",
    "The user's favourite language is Python",
    "Release notes live in the docs folder",
    "The cache expires entries after ten minutes",
]


@dataclass
class Pairs:
    framework: str
    adapter: str
    direct: str
    adapter_ms: list[float] = field(default_factory=list)
    direct_ms: list[float] = field(default_factory=list)

    def row(self) -> str:
        over = sorted(a - d for a, d in zip(self.adapter_ms, self.direct_ms, strict=True))
        p90 = over[int(0.9 * (len(over) - 1))]
        return (
            f"| {self.framework} | `{self.adapter}` | {self.direct} | {len(over)} |"
            f" {statistics.median(self.direct_ms):.2f} | {statistics.median(self.adapter_ms):.2f} |"
            f" **{statistics.median(over):.3f}** | {p90:.3f} |"
        )


Timed = Callable[[], Awaitable[float]]


def timing(call: Callable[[], Awaitable[Any]]) -> Timed:
    async def run() -> float:
        start = time.perf_counter()
        await call()
        return (time.perf_counter() - start) * 1000

    return run


def timing_sync(call: Callable[[], Any]) -> Timed:
    """A synchronous call, timed inside the thread that makes it."""

    def run() -> float:
        start = time.perf_counter()
        call()
        return (time.perf_counter() - start) * 1000

    async def in_thread() -> float:
        return await asyncio.to_thread(run)

    return in_thread


async def pairs(out: Pairs, n: int, adapter: Timed, direct: Timed) -> Pairs:
    for _ in range(20):  # warm both paths: channels, caches, the query vector
        await adapter()
        await direct()
    for i in range(n):
        for which in ("adapter", "direct") if i % 2 else ("direct", "adapter"):
            ms = await (adapter if which == "adapter" else direct)()
            getattr(out, f"{which}_ms").append(ms)
    return out


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def _store_with_facts(client: NexusClient) -> tuple[NexusStore, int, int]:
    """A NexusStore holding FACTS, its project's id, and fact-0's memory id."""
    store = NexusStore(client=client, project=PROJECT, index_fields=["text"])
    for i, fact in enumerate(FACTS):
        await store.aput(NAMESPACE, f"fact-{i}", {"text": fact})
    project_id = await store._conn.project_id(client)
    memory_id = (await store._find(client, project_id, NAMESPACE, "fact-0")).memory_id  # noqa: SLF001
    return store, project_id, memory_id


async def _chat_history(client: NexusClient) -> tuple[NexusChatMessageHistory, memory_pb2.Session]:
    """A chat history of five turns, and its session."""
    history = NexusChatMessageHistory("bench-chat", client=client, project=PROJECT, user_id=USER)
    for n_turn in range(5):
        await history.aadd_messages(
            [HumanMessage(f"question {n_turn} about the database"), AIMessage("an answer")]
        )
    return history, await client.get_session(external_id=history.external_id)


async def _update_calls(
    client: NexusClient, store: NexusStore, memory_id: int
) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    """fact-0 updated through the store, and the same update made directly
    (each call changes the text, so every update writes)."""
    flip = [0]
    changed = memory_pb2.Memory()
    changed.CopyFrom((await client.get_memory(id=memory_id, user_id=USER)).to_message())

    async def store_put() -> None:
        flip[0] ^= 1
        await store.aput(NAMESPACE, "fact-0", {"text": f"{FACTS[0]} ({flip[0]})"})

    async def direct_update() -> None:
        flip[0] ^= 1
        value = f'{{"text": "{FACTS[0]} ({flip[0]})"}}'
        changed.metadata["langgraph"]["value"] = value
        changed.content = f"{FACTS[0]} ({flip[0]})"
        changed.title = changed.content
        await client.update_memory(
            memory=changed, update_mask={"paths": ["title", "content", "metadata"]}, user_id=USER
        )

    return store_put, direct_update


async def measure(client: NexusClient, n: int) -> list[Pairs]:
    store, project_id, memory_id = await _store_with_facts(client)
    scope = memory_pb2.MemoryScope(project_id=project_id, user_id=USER, include_archived=True)
    plain_scope = memory_pb2.MemoryScope(project_id=project_id, user_id=USER)

    history, session = await _chat_history(client)
    lc = LangChainRetriever(client=client, project=PROJECT, user_id=USER, k=4)
    li = LlamaIndexRetriever(client=client, project=PROJECT, user_id=USER, similarity_top_k=4)
    block = NexusMemoryBlock(client=client, project=PROJECT, user_id=USER)
    asked = [ChatMessage(role="user", content=QUERY)]
    store_put, direct_update = await _update_calls(client, store, memory_id)

    async def history_direct() -> None:
        found = await client.get_session(external_id=history.external_id)
        await client.list_episodes(session_id=found.id, page_size=1000)

    assert session.id
    get_direct = timing(lambda: client.get_memory(id=memory_id, user_id=USER))
    search = timing(lambda: drain(client.search_memories(query=QUERY, scope=scope, limit=100)))
    search4 = timing(lambda: drain(client.search_memories(query=QUERY, scope=plain_scope, limit=4)))
    return [
        await pairs(
            Pairs("LangGraph", "NexusStore.aget", "GetMemory"),
            n,
            timing(lambda: store.aget(NAMESPACE, "fact-0")),
            get_direct,
        ),
        await pairs(
            Pairs("LangGraph", "NexusStore.aput (update)", "UpdateMemory"),
            n,
            timing(store_put),
            timing(direct_update),
        ),
        await pairs(
            Pairs("LangGraph", "NexusStore.asearch (query)", "SearchMemories (100)"),
            n,
            timing(lambda: store.asearch(NAMESPACE, query=QUERY)),
            search,
        ),
        await pairs(
            Pairs("LangGraph", "NexusStore.get (sync, from a thread)", "GetMemory"),
            n,
            timing_sync(lambda: store.get(NAMESPACE, "fact-0")),
            get_direct,
        ),
        await pairs(
            Pairs("LangChain", "NexusRetriever.ainvoke", "SearchMemories (4)"),
            n,
            timing(lambda: lc.ainvoke(QUERY)),
            search4,
        ),
        await pairs(
            Pairs(
                "LangChain", "NexusChatMessageHistory.aget_messages", "GetSession + ListEpisodes"
            ),
            n,
            timing(history.aget_messages),
            timing(history_direct),
        ),
        await pairs(
            Pairs("LlamaIndex", "NexusRetriever.aretrieve", "SearchMemories (4)"),
            n,
            timing(lambda: li.aretrieve(QUERY)),
            search4,
        ),
        await pairs(
            Pairs("LlamaIndex", "NexusMemoryBlock.aget", "SelectMemories"),
            n,
            timing(lambda: block.aget(asked, session_id="bench-thread")),
            timing(
                lambda: drain(
                    client.select_memories(
                        prompt=QUERY, scope=plain_scope, thread_id="bench-thread", limit=10
                    )
                )
            ),
        ),
    ]


async def run(n: int) -> list[Pairs]:
    with tempfile.TemporaryDirectory(prefix="nexus-integrations-bench-") as tmp:
        server = ServerProcess(Path(tmp) / "data", keep_log=False)
        await asyncio.to_thread(server.start)
        try:
            async with NexusClient(server.target) as client:
                return await measure(client, n)
        finally:
            await asyncio.to_thread(server.stop)


def report(results: list[Pairs], command: str) -> str:
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        "",
        "## The framework adapters against the typed client's calls (issue 39)",
        "",
        f"`{command}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, on this 2-core"
        " machine: the real server (`nexus-grpc serve`, its defaults), and in the benchmark's"
        " process each adapter and the same typed client it wraps. Each pair is timed back to"
        " back, alternating which goes first; the overhead is the median of the pairs'"
        " differences (target: under 1 ms). The adapter's calls are warmed (project resolved,"
        " the key's memory id known), as in an application's every turn. Load average (1, 5,"
        f" 15 min) at the end: {load}.",
        "",
        "| framework | adapter call | typed client call(s) | pairs | direct p50 ms |"
        " adapter p50 ms | overhead p50 ms | overhead p90 ms |",
        "|---|---|---|---|---|---|---|---|",
        *(r.row() for r in results),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=300, help="timed pairs per call")
    parser.add_argument("--append", type=Path, help="also append the table to this report")
    args = parser.parse_args()
    results = asyncio.run(run(args.pairs))
    command = ".venv/bin/python -m bench.integrations_overhead" + (
        f" --pairs {args.pairs}" if args.pairs != 300 else ""
    )
    text = report(results, command)
    print(text)
    if args.append is not None:
        with args.append.open("a") as out:
            out.write(text)


if __name__ == "__main__":
    main()
