"""GetServiceStatus checks each dependency instead of assuming it, and
``nexus-grpc doctor`` reads a real server's answers: healthy, degraded
(a model missing, the LLM server gone, the embedder failing) and
unreachable.  The LLM backend is also run through the server with
``--llm-api openai`` against Ollama's OpenAI-compatible endpoints."""

from __future__ import annotations

import io
import json

from nexus_grpc.embedding import make_embedder
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.doctor import doctor
from tests.ollama_stub import Reply
from tests.support import HashingEmbedder, start_harness, take

MODELS = ("qwen2.5:3b", "qwen2.5:1.5b")
EMPTY = {"entities": [], "relationships": []}


# The conftest's ``stub`` answers chats no test scripted with this.
STUB_DEFAULT_REPLY = EMPTY


async def _status(h) -> tuple[str, dict[str, tuple[bool, str]]]:
    status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
    return status.state, {d.name: (d.ok, d.detail) for d in status.dependencies}


async def test_healthy_server_with_the_real_embedder(tmp_path, stub):
    embedder = make_embedder("minilm", threads=1)
    h = await start_harness(
        tmp_path / "data", embedder=embedder, ollama_url=stub.url, selection_model=MODELS[1]
    )
    try:
        state, deps = await _status(h)
        assert state == "SERVING", deps
        assert deps["sqlite"][0] and "schema version" in deps["sqlite"][1]
        assert deps["embedder"][0] and deps["vector_index"][0]
        assert deps["ollama"] == (True, f"{stub.url}: qwen2.5:3b, qwen2.5:1.5b")
        out = io.StringIO()
        assert await doctor(h.target, 5.0, out=out) == 0
        text = out.getvalue()
        for needle in (
            "state             SERVING",
            "ok    sqlite",
            "ok    embedder",
            "ok    vector_index",
            "ok    ollama",
        ):
            assert needle in text, text
    finally:
        await h.close()


async def test_without_an_llm_or_reranker_the_server_is_serving_and_says_they_are_off(harness):
    # What `make run` starts: no LLM server, no reranker. The README calls that
    # complete, so nothing is failing: both are off, and say what waits.
    status = await harness.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
    deps = {d.name: d for d in status.dependencies}
    assert status.state == "SERVING", deps
    assert deps["ollama"].ok and deps["ollama"].off
    assert "extraction, summaries and memory formation wait" in deps["ollama"].detail
    assert deps["reranker"].ok and deps["reranker"].off
    assert not any(d.off for name, d in deps.items() if name not in ("ollama", "reranker"))
    out = io.StringIO()
    assert await doctor(harness.target, 5.0, out=out) == 0
    text = out.getvalue()
    assert "state             SERVING" in text and "FAIL" not in text, text
    assert "off   ollama" in text and "off   reranker" in text, text


async def test_a_missing_model_an_absent_server_and_a_failing_embedder_degrade(tmp_path, stub):
    embedder = HashingEmbedder()
    h = await start_harness(
        tmp_path / "data", embedder=embedder, ollama_url=stub.url, selection_model=MODELS[1]
    )
    try:
        assert (await _status(h))[0] == "SERVING"  # the positive case first
        stub.models = ["qwen2.5:3b"]  # the selection model is not pulled
        state, deps = await _status(h)
        assert state == "DEGRADED"
        assert deps["ollama"][0] is False
        assert (
            "does not have qwen2.5:1.5b; pull with `ollama pull qwen2.5:1.5b`" in deps["ollama"][1]
        )
        out = io.StringIO()
        assert await doctor(h.target, 5.0, out=out) == 1
        assert "FAIL  ollama" in out.getvalue() and "qwen2.5:1.5b" in out.getvalue()

        stub.stop()
        state, deps = await _status(h)
        # Configured but unreachable is a failure, never "off".
        assert state == "DEGRADED" and "cannot reach Ollama" in deps["ollama"][1]
        status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
        assert not any(d.off for d in status.dependencies if d.name == "ollama")

        embedder.fail_with = RuntimeError("model file is gone")
        state, deps = await _status(h)
        assert deps["embedder"] == (False, "test-hashing-64:64: cannot embed: model file is gone")
        out = io.StringIO()
        assert await doctor(h.target, 5.0, out=out) == 1
        assert "FAIL  embedder" in out.getvalue()
    finally:
        await h.close()
    # And once the server is gone, doctor says it cannot reach it.
    out = io.StringIO()
    assert await doctor(h.target, 0.5, out=out) == 2
    assert "unreachable" in out.getvalue()


async def test_openai_backend_through_the_server(tmp_path, stub):
    answer = {
        "entities": [{"name": "Alice", "type": "person", "notes": None}],
        "relationships": [],
    }
    stub.default = Reply.of(answer)
    h = await start_harness(tmp_path / "data", llm_api="openai", llm_url=stub.url + "/v1")
    try:
        state, deps = await _status(h)
        assert state == "SERVING" and deps["openai"][0], deps
        ses = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
        )
        ep = await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=ses.id, user_message="I am Alice", ai_response="Hi"
            )
        )
        call = h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(episode_id=ep.id))
        [event] = await take(call, 1)
        call.cancel()
        assert event.status == graph_pb2.EXTRACTION_STATUS_DONE
        assert [e.name for e in event.entities] == ["Alice"]
        (request,) = stub.requests_to("/v1/chat/completions")
        assert request["response_format"]["type"] == "json_schema"
        assert request["max_tokens"] == 1500
        assert stub.requests_to("/api/chat") == []  # nothing through Ollama's own API
        assert json.loads(json.dumps(request["messages"]))[0]["role"] == "system"
    finally:
        await h.close()
