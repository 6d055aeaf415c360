"""The caller's deadline reaches the dependencies an RPC waits on.

The budget a dependency is given (our limit cut to what the caller has left)
is a pure function, tested in tests/unit/test_server_runtime.py."""

from __future__ import annotations

import time

import pytest

from nexus_grpc.errors import DeadlineExceeded
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.llm import LLMUnavailable, OllamaClient
from nexus_grpc.runtime import deadlines
from nexus_grpc.vectors import EdgeVectorIndex, QdrantVectorIndex
from tests.ollama_stub import Reply


async def test_ollama_call_gives_up_when_the_rpc_deadline_does(stub):
    llm = OllamaClient(stub.url, timeout=30)
    stub.enqueue(Reply.slow(10, "{}"))
    try:
        deadlines.start(0.3)
        started = time.monotonic()
        with pytest.raises(LLMUnavailable, match=r"within 0\.[0-3]"):
            await llm.chat_text(
                "qwen2.5:3b", [{"role": "user", "content": "hi"}], temperature=0.1, num_predict=10
            )
        assert time.monotonic() - started < 3  # not the client's own 30 s
    finally:
        deadlines.start(None)
        await llm.close()


@pytest.mark.parametrize("make_index", ["edge", "remote"])
async def test_a_search_whose_caller_gave_up_is_not_started(tmp_path, make_index):
    if make_index == "edge":
        index = EdgeVectorIndex(tmp_path / "v")
    else:
        index = QdrantVectorIndex(location=":memory:")
    try:
        await index.ensure_collection("episodes", 4, {"sessionId": "integer"})
        deadlines.start(-0.01)
        with pytest.raises(DeadlineExceeded):
            await index.search("episodes", [1.0, 0, 0, 0], filter=None, limit=3)
        deadlines.start(5.0)
        assert await index.search("episodes", [1.0, 0, 0, 0], filter=None, limit=3) == []
    finally:
        deadlines.start(None)
        await index.close()


async def test_the_servicer_sees_the_clients_deadline(harness, monkeypatch):
    seen: list[float | None] = []
    real = harness.app.conversations.create_session

    async def spy(*args, **kwargs):
        seen.append(deadlines.remaining())
        return await real(*args, **kwargs)

    monkeypatch.setattr(harness.app.conversations, "create_session", spy)
    await harness.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session()), timeout=5
    )
    await harness.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
    )
    # gRPC carries the timeout, not the instant, and may round it up on the wire
    # (grpc-timeout units): the server can see a few milliseconds more than 5 s.
    assert seen[0] is not None and 0 < seen[0] <= 5.1
    assert seen[1] is None  # no deadline from the client: none invented
