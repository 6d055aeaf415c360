"""Tenants take turns at the LLM (issue 37, item 5): one tenant's backlog
never delays another tenant's extraction by more than one job.

Measured with the stand-in LLM, as the issue asks: tenant atlas imports 2,000
episodes (or writes a run of live ones), tenant bravo then writes one; the
stand-in holds every extraction call until bravo's episode is stored, so the
extraction worker's slots are all busy with atlas's jobs when it arrives, and
then answers them all. The order in which the stand-in receives the
extraction prompts is the order extractions start: bravo's must come after
at most one more of atlas's. No sleeps: the test waits on the prompts.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.ollama_stub import OllamaStub
from tests.support import Harness, bearer, start_harness

BOTH_STORES = True
STUB_DEFAULT_REPLY = {"entities": [], "relationships": []}

ATLAS_KEY = "atlas-importer-key-00000001"
BRAVO_KEY = "bravo-live-key-000000000001"
BACKLOG = {"import": 2000, "live": 60}


class HeldExtractions:
    """The stand-in's responder: records each extraction prompt in the order it
    arrives and holds the answer until ``release``; other calls (summaries)
    pass."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self._released = threading.Event()
        self._arrived = threading.Condition()

    def __call__(self, endpoint: str, body: dict[str, Any]) -> None:
        messages = body.get("messages") or []
        if not messages or "knowledge graph" not in str(messages[0].get("content", "")):
            return None
        with self._arrived:
            self.prompts.append(str(messages[-1].get("content", "")))
            self._arrived.notify_all()
        self._released.wait(60)
        return None  # the default reply: nothing found

    def release(self) -> None:
        self._released.set()

    async def until(self, done: Any) -> list[str]:
        def wait() -> list[str]:
            with self._arrived:
                if not self._arrived.wait_for(lambda: done(self.prompts), 60):
                    raise TimeoutError(f"{len(self.prompts)} extraction prompts so far")
                return list(self.prompts)

        return await asyncio.to_thread(wait)


@pytest.fixture
async def server(tmp_path, stub: OllamaStub, store_settings) -> AsyncIterator[Harness]:
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": ATLAS_KEY, "name": "atlas", "users": []},
                    {"key": BRAVO_KEY, "name": "bravo", "users": []},
                ]
            }
        )
    )
    h = await start_harness(
        tmp_path / "data", ollama_url=stub.url, auth_keys_file=str(keys), **store_settings
    )
    yield h
    await h.close()


async def session_of(h: Harness, key: str) -> int:
    made = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session()), metadata=bearer(key)
    )
    return made.id


async def write(h: Harness, key: str, how: str, texts: list[str]) -> None:
    """``texts`` as episodes of a new session of ``key``'s tenant: imported
    (bulk priority) or created one by one (live)."""
    session_id = await session_of(h, key)
    requests = [
        memory_pb2.CreateEpisodeRequest(
            session_id=session_id, user_message=t, ai_response="ok", request_id=f"r{i}"
        )
        for i, t in enumerate(texts)
    ]
    if how == "import":

        async def stream() -> AsyncIterator[memory_pb2.ImportEpisodesRequest]:
            for r in requests:
                yield memory_pb2.ImportEpisodesRequest(episode=r)

        answer = await h.memory.ImportEpisodes(stream(), metadata=bearer(key))
        assert answer.created == len(texts)
    else:
        for r in requests:
            await h.memory.CreateEpisode(r, metadata=bearer(key))


@pytest.mark.parametrize(
    ("atlas", "bravo"),
    [
        ("import", "live"),  # the measure (live before bulk decides it)
        ("import", "import"),  # the same priority: turns decide it
        ("live", "live"),
    ],
)
async def test_a_tenants_extraction_starts_after_at_most_one_of_another_tenants_backlog(
    server: Harness, stub: OllamaStub, atlas: str, bravo: str
):
    h = server
    held = HeldExtractions()
    stub.responder = held
    slots = h.app.extraction_worker.config.concurrency
    await write(h, ATLAS_KEY, atlas, [f"atlas note {i}" for i in range(BACKLOG[atlas])])
    # Every slot of the extraction worker is busy with one of atlas's jobs.
    await held.until(lambda p: len(p) >= slots)
    await write(h, BRAVO_KEY, bravo, ["bravo asks about the harbour"])
    before = len(held.prompts)
    assert before == slots
    held.release()
    prompts = await held.until(lambda p: any("bravo asks" in t for t in p))
    bravo_at = next(i for i, t in enumerate(prompts) if "bravo asks" in t)
    started_first = [t for t in prompts[before:bravo_at] if "atlas note" in t]
    # Seen once under make test on PostgreSQL (live, live): 2 started first. The
    # message names the prompts in their order, so a next failure says which.
    assert len(started_first) <= 1, (
        f"{len(started_first)} of atlas's extractions started first:"
        f" {[t[-40:] for t in prompts[before : bravo_at + 1]]}"
    )
