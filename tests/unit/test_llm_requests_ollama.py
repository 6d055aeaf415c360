"""What the Ollama client (llm/client.py's ``OllamaClient``, through the real
``ollama`` package) reads from Ollama's answers, on httpx's in-process
transport (no socket, no server): a model's context window from /api/show's
model info, whichever architecture it names; a chat's options and the server's
token counts, a count that is no count left to the estimate; a stream's
counts from its last line; the models /api/tags lists. And which backend the
``--llm-api`` setting makes.

The same client against the Ollama stand-in over real HTTP (the wiring, and
every way a call fails there) is tests/integration/llm/test_llm.py's and
tests/integration/llm/test_llm_budget.py's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from nexus_grpc.core import llm_usage
from nexus_grpc.llm import OllamaClient, OpenAIClient, make_client, tokens
from tests.unit.in_process_http import in_process_clients

MODEL = "qwen2.5:3b"
MSGS = [{"role": "user", "content": "hi"}]
QWEN = {"general.architecture": "qwen2", "qwen2.context_length": 32768}
DEFAULT = tokens.DEFAULT_CONTEXT_LENGTH

Route = Callable[[httpx.Request], httpx.Response]


class Ollama:
    """Ollama's API in the test's process: ``routes`` answer by path (a 404
    as Ollama words it otherwise); every request's JSON body is kept."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.routes: dict[str, Route] = {"/api/show": show(QWEN)}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        self.sent.append((request.url.path, body))
        route = self.routes.get(request.url.path)
        if route is None:
            return httpx.Response(404, json={"error": "not found"})
        return route(request)

    def chats(self) -> list[dict[str, Any]]:
        return [body for path, body in self.sent if path == "/api/chat"]


def show(model_info: dict[str, Any] | None) -> Route:
    body: dict[str, Any] = {"modelfile": "", "template": "", "details": {}}
    if model_info is not None:
        body["model_info"] = model_info
    return lambda request: httpx.Response(200, json=body)


def answer(content: str, **counts: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "created_at": "2026-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": "stop",
        **counts,
    }


@pytest.fixture
def ollama() -> Ollama:
    return Ollama()


@pytest.fixture
async def connect(
    ollama: Ollama, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., OllamaClient]]:
    """An OllamaClient made as the server makes it, its HTTP in-process."""

    def client(**options: Any) -> OllamaClient:
        options.setdefault("timeout", 5)
        return OllamaClient("http://ollama.local:11434", **options)

    async with in_process_clients(ollama, monkeypatch, client) as make:
        yield make


# -- the context window ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_info", "context"),
    [
        (QWEN, 32768),
        # An architecture whose key is not known: any key ending .context_length.
        ({"general.architecture": "newarch", "other.context_length": 8192}, 8192),
        ({"llama.context_length": 131072}, 131072),
        # No count, or no usable one: the documented default.
        ({"general.architecture": "qwen2"}, DEFAULT),
        ({"general.architecture": "qwen2", "qwen2.context_length": 0}, DEFAULT),
        ({"general.architecture": "qwen2", "qwen2.context_length": "big"}, DEFAULT),
        # Ollama before 0.3 leaves model_info out.
        (None, DEFAULT),
    ],
)  # fmt: skip
async def test_the_context_is_read_from_the_models_info(
    ollama: Ollama, connect, model_info: dict | None, context: int
) -> None:
    ollama.routes["/api/show"] = show(model_info)
    client = connect()
    assert await client.context_length(MODEL) == context
    assert await client.context_length(MODEL) == context
    assert ollama.sent == [("/api/show", {"model": MODEL})]  # once per model


# -- a chat ---------------------------------------------------------------------------


async def test_a_chat_sends_its_options_and_reads_the_servers_counts(ollama, connect) -> None:
    ollama.routes["/api/chat"] = lambda r: httpx.Response(
        200, json=answer('{"entities": []}', prompt_eval_count=30, eval_count=6)
    )
    schema = {"type": "object"}
    client = connect()
    with llm_usage.ledger(llm_usage.EXTRACTION) as ledger:
        got = await client.chat_json(MODEL, MSGS, schema, temperature=0.1, num_predict=1500)
    assert got == {"entities": []}
    [body] = ollama.chats()
    assert body["format"] == schema and body["stream"] is False
    # num_ctx: the smallest step holding the prompt and 1,500 answer tokens.
    assert body["options"] == {"temperature": 0.1, "num_predict": 1500, "num_ctx": 2048}
    [call] = ledger.unwritten()
    assert (call.prompt_tokens, call.completion_tokens, call.estimated) == (30, 6, False)


@pytest.mark.parametrize("prompt_eval_count", [None, -1])
async def test_a_prompt_ollama_did_not_count_is_estimated(
    ollama, connect, prompt_eval_count: int | None
) -> None:
    # Ollama leaves prompt_eval_count out when the whole prompt was in its cache.
    counts = {"eval_count": 2}
    if prompt_eval_count is not None:
        counts["prompt_eval_count"] = prompt_eval_count
    ollama.routes["/api/chat"] = lambda r: httpx.Response(200, json=answer("{}", **counts))
    with llm_usage.ledger(llm_usage.EXTRACTION) as ledger:
        await connect().chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    [call] = ledger.unwritten()
    assert call.estimated
    assert (call.prompt_tokens, call.completion_tokens) == (
        tokens.approximate_messages(MSGS), 2)  # fmt: skip


async def test_a_stream_sends_no_format_and_counts_its_last_line(ollama, connect) -> None:
    parts = [
        {"model": MODEL, "created_at": "2026-01-01T00:00:00Z",
         "message": {"role": "assistant", "content": c}, "done": False}
        for c in ("Hello", " there", "")
    ]  # fmt: skip
    last = answer(" world", prompt_eval_count=11, eval_count=3)
    lines = "".join(json.dumps(p) + "\n" for p in [*parts, last])
    ollama.routes["/api/chat"] = lambda r: httpx.Response(
        200, text=lines, headers={"content-type": "application/x-ndjson"}
    )
    with llm_usage.ledger(llm_usage.OVERVIEW) as ledger:
        got = [
            d
            async for d in connect().chat_stream(
                MODEL, MSGS, temperature=0.2, num_predict=1200, timeout=5
            )
        ]
    assert got == ["Hello", " there", " world"]  # an empty part yields nothing
    [body] = ollama.chats()
    assert body["stream"] is True and "format" not in body
    assert body["options"] == {"temperature": 0.2, "num_predict": 1200, "num_ctx": 2048}
    [call] = ledger.unwritten()
    assert (call.outcome, call.prompt_tokens, call.completion_tokens) == ("ok", 11, 3)


async def test_the_models_are_what_tags_lists(ollama, connect) -> None:
    ollama.routes["/api/tags"] = lambda r: httpx.Response(
        200,
        json={"models": [{"model": MODEL, "name": MODEL}, {"model": "nomic-embed-text:latest"}]},
    )
    client = connect()
    assert await client.list_models() == [MODEL, "nomic-embed-text:latest"]
    assert await client.missing_models(["qwen2.5:3b", "nomic-embed-text", "llama9"]) == ["llama9"]


# -- the backend a setting makes ------------------------------------------------------


async def test_the_llm_api_setting_makes_its_backend(monkeypatch) -> None:
    real = httpx.AsyncClient
    monkeypatch.setattr(
        httpx, "AsyncClient", lambda **o: real(transport=httpx.MockTransport(Ollama()), **o)
    )
    ollama_client = make_client("ollama", "http://ollama.local:11434", timeout=5)
    openai_client = make_client(
        "openai", "http://llm.local:8080/v1", timeout=5, context_length=2048, api_key="k"
    )
    try:
        assert type(ollama_client) is OllamaClient and type(openai_client) is OpenAIClient
        assert await openai_client.context_length(MODEL) == 2048
    finally:
        await ollama_client.close()
        await openai_client.close()
    with pytest.raises(ValueError, match="--llm-api must be one of ollama, openai, not 'vllm'"):
        make_client("vllm", "http://llm.local", timeout=5)
