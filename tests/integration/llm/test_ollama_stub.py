"""The stub is only useful if the real ``ollama`` client accepts it as Ollama.

Every test here drives it with the real ``ollama.AsyncClient`` (or raw httpx for
endpoints the client has no method for) and checks the wire format.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import ollama
import pytest

try:
    from ollama_stub import DEFAULT_MODELS, OllamaStub, Reply
except ImportError:  # tests/ is a package
    from tests.ollama_stub import DEFAULT_MODELS, OllamaStub, Reply

SCHEMA = {
    "type": "object",
    "properties": {"age": {"type": "integer"}},
    "required": ["age"],
}
USER = [{"role": "user", "content": "How old is Ollama?"}]


@pytest.fixture
async def client(stub: OllamaStub) -> AsyncIterator[ollama.AsyncClient]:
    c = ollama.AsyncClient(host=stub.url, timeout=5)
    yield c
    await c.close()


async def test_chat_non_streaming_with_format(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    stub.enqueue(Reply.of({"age": 22}))
    response = await client.chat(
        model="qwen2.5:3b",
        messages=USER,
        format=SCHEMA,
        options={"temperature": 0.1, "num_predict": 50},
    )
    assert json.loads(response.message.content or "") == {"age": 22}
    assert response.message.role == "assistant"
    assert response.done is True
    assert response.done_reason == "stop"
    assert response.model == "qwen2.5:3b"
    assert response.eval_count and response.prompt_eval_count

    (request,) = stub.requests
    assert request.method == "POST" and request.path == "/api/chat"
    assert request["stream"] is False
    assert request["format"] == SCHEMA
    assert request["options"] == {"temperature": 0.1, "num_predict": 50}
    assert request["messages"] == USER


async def test_chat_streaming_ndjson(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    text = "The sky is blue because of Rayleigh scattering."
    stub.enqueue(text)
    parts = [p async for p in await client.chat(model="qwen2.5:3b", messages=USER, stream=True)]
    assert len(parts) > 3
    assert "".join(p.message.content or "" for p in parts) == text
    assert all(p.done is False for p in parts[:-1])
    assert parts[-1].done is True and parts[-1].done_reason == "stop"
    assert parts[-1].message.content == ""
    assert stub.requests[0]["stream"] is True


async def test_stream_is_default_on_the_wire(stub: OllamaStub) -> None:
    """Raw HTTP: no "stream" key means a chunked NDJSON stream, as in Ollama."""
    stub.enqueue(Reply(content="ab", chunks=("a", "b")))
    async with (
        httpx.AsyncClient(base_url=stub.url) as http,
        http.stream("POST", "/api/chat", json={"model": "qwen2.5:3b", "messages": USER}) as r,
    ):
        assert r.headers["content-type"] == "application/x-ndjson"
        assert r.headers["transfer-encoding"] == "chunked"
        lines = [json.loads(line) async for line in r.aiter_lines() if line]
    assert [line["message"]["content"] for line in lines] == ["a", "b", ""]
    assert [line["done"] for line in lines] == [False, False, True]


async def test_generate_both_modes(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    stub.enqueue("one two three", "four five")
    full = await client.generate(model="qwen2.5:3b", prompt="count")
    assert full.response == "one two three" and full.done
    parts = [p async for p in await client.generate(model="qwen2.5:3b", prompt="x", stream=True)]
    assert "".join(p.response or "" for p in parts) == "four five"
    assert parts[-1].done and parts[-1].response == ""
    assert stub.requests_to("/api/generate")[0]["prompt"] == "count"


async def test_embed_deterministic_unit_vectors(
    stub: OllamaStub, client: ollama.AsyncClient
) -> None:
    stub.embed_dim = 16
    first = await client.embed(model="nomic-embed-text", input=["alpha", "beta"])
    again = await client.embed(model="nomic-embed-text", input="alpha")
    assert len(first.embeddings) == 2 and all(len(v) == 16 for v in first.embeddings)
    assert list(again.embeddings[0]) == list(first.embeddings[0])
    assert list(first.embeddings[0]) != list(first.embeddings[1])
    assert math.isclose(math.sqrt(sum(x * x for x in first.embeddings[1])), 1.0)


async def test_list_and_version(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    listed = await client.list()
    assert [m.model for m in listed.models] == [
        m if ":" in m else f"{m}:latest" for m in DEFAULT_MODELS
    ]
    assert listed.models[0].details and listed.models[0].details.family
    async with httpx.AsyncClient(base_url=stub.url) as http:
        assert (await http.get("/api/version")).json() == {"version": stub.version}
        assert (await http.get("/")).text == "Ollama is running"


async def test_unknown_model_is_404(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    with pytest.raises(ollama.ResponseError) as info:
        await client.chat(model="llama9:70b", messages=USER)
    assert info.value.status_code == 404
    assert info.value.error == 'model "llama9:70b" not found, try pulling it first'
    # Streaming requests get the same status before any chunk.
    with pytest.raises(ollama.ResponseError) as info:
        async for _ in await client.chat(model="llama9:70b", messages=USER, stream=True):
            pass
    assert info.value.status_code == 404
    # An untagged name means ":latest", as in Ollama.
    await client.embed(model="nomic-embed-text", input="x")


async def test_fail_with_500_then_recover(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    stub.fail_with(500, "llama runner process has terminated")
    with pytest.raises(ollama.ResponseError) as info:
        await client.chat(model="qwen2.5:3b", messages=USER)
    assert info.value.status_code == 500
    assert "runner process" in info.value.error
    with pytest.raises(ollama.ResponseError):
        await client.list()
    stub.clear_faults()
    assert (await client.list()).models


async def test_error_line_mid_stream(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    stub.enqueue(Reply(content="partial answer", stream_error="model runner crashed"))
    got: list[str] = []
    with pytest.raises(ollama.ResponseError, match="model runner crashed"):
        async for part in await client.chat(model="qwen2.5:3b", messages=USER, stream=True):
            got.append(part.message.content or "")
    assert "".join(got) == "partial answer"


async def test_malformed_body(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    stub.enqueue(Reply.garbage())
    with pytest.raises(json.JSONDecodeError):  # the client does not wrap this
        await client.chat(model="qwen2.5:3b", messages=USER)
    stub.malformed()
    with pytest.raises(json.JSONDecodeError):
        async for _ in await client.chat(model="qwen2.5:3b", messages=USER, stream=True):
            pass


async def test_delay_triggers_client_timeout(stub: OllamaStub) -> None:
    stub.enqueue(Reply.slow(5, "late"))
    async with ollama.AsyncClient(host=stub.url, timeout=0.2) as c:
        with pytest.raises(httpx.ReadTimeout):  # not wrapped by the client either
            await c.chat(model="qwen2.5:3b", messages=USER)
    stub.delay(5)
    async with ollama.AsyncClient(host=stub.url, timeout=0.2) as c:
        with pytest.raises(httpx.ReadTimeout):
            await c.list()


async def test_stop_and_restart_on_same_port(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    url = stub.url
    await client.list()  # leaves a pooled keep-alive connection
    stub.stop()
    with pytest.raises(ConnectionError):
        await client.list()
    stub.start()
    assert stub.url == url
    assert (await client.list()).models


async def test_stop_drops_a_request_stuck_in_delay(stub: OllamaStub) -> None:
    stub.enqueue(Reply.slow(30, "never"))
    async with ollama.AsyncClient(host=stub.url, timeout=10) as c:
        call = asyncio.create_task(c.chat(model="qwen2.5:3b", messages=USER))
        await stub.wait_for_requests(1)
        await asyncio.to_thread(stub.stop)
        with pytest.raises(httpx.TransportError):
            await asyncio.wait_for(call, 5)


async def test_responder_and_rules(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    stub.add_rule({"kind": "extraction"}, contains="Known entities", times=1)
    stub.responder = lambda endpoint, body: (
        Reply.error_status(503, "busy") if endpoint == "/api/embed" else None
    )
    first = await client.chat(
        model="qwen2.5:3b", messages=[{"role": "user", "content": "Known entities: none"}]
    )
    assert json.loads(first.message.content or "") == {"kind": "extraction"}
    second = await client.chat(
        model="qwen2.5:3b", messages=[{"role": "user", "content": "Known entities: none"}]
    )
    assert second.message.content == "{}"  # rule used up: default reply
    with pytest.raises(ollama.ResponseError) as info:
        await client.embed(model="nomic-embed-text", input="x")
    assert info.value.status_code == 503


async def test_wait_for_requests(stub: OllamaStub, client: ollama.AsyncClient) -> None:
    task = asyncio.create_task(client.list())
    seen = await stub.wait_for_requests(1, path="/api/tags")
    assert seen[0].method == "GET"
    await task
    with pytest.raises(TimeoutError):
        await stub.wait_for_requests(2, timeout=0.05, path="/api/tags")


def test_subprocess_mode(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    record = tmp_path / "requests.jsonl"
    script.write_text(
        json.dumps(
            {
                "models": ["qwen2.5:3b"],
                "rules": [{"contains": "summary", "reply": {"content": "A short summary."}}],
                "queue": [{"content": {"entities": [], "relationships": []}}],
            }
        )
    )
    stub_py = Path(__file__).resolve().parents[2] / "ollama_stub.py"
    cmd = [sys.executable, str(stub_py), "--port", "0", "--script", str(script)]
    with subprocess.Popen(
        cmd + ["--record", str(record)], stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # the stub prints it once listening
            assert line.startswith("OLLAMA_STUB_READY ")
            with ollama.Client(host=line.split()[1], timeout=5) as c:
                summary = c.chat(
                    model="qwen2.5:3b", messages=[{"role": "user", "content": "write a summary"}]
                )
                assert summary.message.content == "A short summary."
                extraction = c.chat(model="qwen2.5:3b", messages=USER, format=SCHEMA)
                assert json.loads(extraction.message.content or "") == {
                    "entities": [],
                    "relationships": [],
                }
            lines = [json.loads(x) for x in record.read_text().splitlines()]
            assert [x["path"] for x in lines] == ["/api/chat", "/api/chat"]
            assert lines[1]["body"]["format"] == SCHEMA
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    assert proc.returncode == 0
