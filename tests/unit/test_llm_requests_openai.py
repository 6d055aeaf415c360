"""What the OpenAI-compatible client (llm/openai_client.py) sends and reads,
on httpx's in-process transport (no socket, no server): the context it takes
from /v1/models and llama-server's /props (the smaller of what they say), the
body of a JSON call and of a stream, a stream's events read to ``[DONE]`` with
the server's counts, an answer without a choice refused, and each error status
classed with the server's own words.

Each of these against the Ollama stand-in's /v1 endpoints, over real HTTP
(the wiring), is tests/integration/llm/test_llm_budget.py's ``test_openai_*``;
what every backend shares (budgets, retries, the account) is
tests/unit/test_llm_requests_rules.py's and tests/unit/test_llm_accounting_rules.py's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from nexus_grpc.core import llm_usage
from nexus_grpc.llm import LLMBadOutput, LLMUnavailable, LLMUnreachable, OpenAIClient, tokens
from tests.unit.in_process_http import in_process_clients

MODEL = "qwen2.5:3b"
MSGS = [{"role": "user", "content": "hi"}]
SCHEMA = {"type": "object", "properties": {"entities": {"type": "array"}}}

Route = Callable[[httpx.Request], httpx.Response]


class Server:
    """An OpenAI-compatible server in the test's process: ``routes`` answer
    by (method, path); anything else is a 404. Every request is kept."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.routes: dict[tuple[str, str], Route] = {
            ("GET", "/v1/models"): lambda r: httpx.Response(
                200, json={"object": "list", "data": [{"id": MODEL, "object": "model"}]}
            ),
        }

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        route = self.routes.get((request.method, request.url.path))
        if route is None:
            return httpx.Response(404, json={"error": {"message": "File Not Found"}})
        return route(request)

    def bodies(self, path: str = "/v1/chat/completions") -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.url.path == path]


def completion(content: str, reason: str = "stop", usage: dict | None = None) -> Route:
    body: dict[str, Any] = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": reason,
            }
        ]  # fmt: skip
    }
    if usage is not None:
        body["usage"] = usage
    return lambda request: httpx.Response(200, json=body)


def events(*chunks: object, done: bool = True) -> Route:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks] + (["data: [DONE]\n\n"] if done else [])
    text = ": a comment\n\n" + "".join(lines)
    return lambda request: httpx.Response(
        200, text=text, headers={"content-type": "text/event-stream"}
    )


def delta(text: str, reason: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": reason}]}


@pytest.fixture
def server() -> Server:
    return Server()


@pytest.fixture
async def connect(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., OpenAIClient]]:
    """An OpenAIClient made as the server makes it, over the in-process transport."""

    def openai(host: str = "http://llm.local:8080/v1", **options: Any) -> OpenAIClient:
        options.setdefault("timeout", 5)
        return OpenAIClient(host, **options)

    async with in_process_clients(server, monkeypatch, openai) as make:
        yield make


# -- the context window ---------------------------------------------------------------


async def test_a_server_that_says_nothing_gets_the_default_context(server, connect) -> None:
    client = connect()
    assert await client.context_length(MODEL) == tokens.DEFAULT_CONTEXT_LENGTH
    assert [r.url.path for r in server.requests] == ["/v1/models", "/props"]


async def test_llama_server_gives_the_smaller_of_its_slot_and_the_models_training(
    server, connect
) -> None:
    # llama-server: 16,384 tokens over 2 slots is 8,192 per request, and the
    # model was trained for 32,768: a request gets the smaller.
    slot = {"n_ctx": 8192}
    server.routes[("GET", "/v1/models")] = lambda r: httpx.Response(
        200, json={"data": [{"id": MODEL, "meta": {"n_ctx_train": 32768}},
                            {"id": "qwen2.5:1.5b", "meta": {"n_ctx_train": 32768}}]},
    )  # fmt: skip
    server.routes[("GET", "/props")] = lambda r: httpx.Response(
        200, json={"default_generation_settings": slot}
    )
    client = connect("http://llm.local:8080")
    assert await client.context_length(MODEL) == 8192
    slot["n_ctx"] = 65536
    assert await client.context_length("qwen2.5:1.5b") == 32768  # n_ctx_train
    assert len([r for r in server.requests if r.url.path == "/props"]) == 2


async def test_vllm_says_max_model_len_and_older_llama_server_n_ctx_at_the_top(
    server, connect
) -> None:
    server.routes[("GET", "/v1/models")] = lambda r: httpx.Response(
        200, json={"data": [{"id": MODEL, "max_model_len": 16384}, "not an entry"]}
    )
    client = connect()
    assert await client.context_length(MODEL) == 16384
    server.routes[("GET", "/props")] = lambda r: httpx.Response(200, json={"n_ctx": 4096})
    assert await connect().context_length(MODEL) == 4096


# -- what a call sends and reads ------------------------------------------------------


async def test_a_json_call_sends_the_schema_strictly_and_reads_the_counts(server, connect) -> None:
    server.routes[("POST", "/v1/chat/completions")] = completion(
        '{"entities": []}', usage={"prompt_tokens": 21, "completion_tokens": 5}
    )
    client = connect(api_key="s3cret")
    with llm_usage.ledger(llm_usage.EXTRACTION) as ledger:
        got = await client.chat_json(MODEL, MSGS, SCHEMA, temperature=0.1, num_predict=300)
    assert got == {"entities": []}
    [body] = server.bodies()
    assert body == {
        "model": MODEL,
        "messages": MSGS,
        "temperature": 0.1,
        "max_tokens": 300,
        "stream": False,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
        },
    }
    assert server.requests[-1].headers["authorization"] == "Bearer s3cret"
    [call] = ledger.unwritten()
    assert (call.prompt_tokens, call.completion_tokens, call.estimated) == (21, 5, False)


async def test_an_answer_without_a_choice_is_bad_output(server, connect) -> None:
    server.routes[("POST", "/v1/chat/completions")] = lambda r: httpx.Response(
        200, json={"choices": []}
    )
    with pytest.raises(LLMBadOutput, match="answered without a choice"):
        await connect().chat_text(MODEL, MSGS, temperature=0, num_predict=10)


async def test_a_stream_asks_for_usage_and_reads_events_to_done(server, connect) -> None:
    usage = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}
    server.routes[("POST", "/v1/chat/completions")] = events(
        delta("one"), delta(" two"), delta(" three", "stop"), usage
    )
    client = connect()
    with llm_usage.ledger(llm_usage.OVERVIEW) as ledger:
        got = [d async for d in client.chat_stream(MODEL, MSGS, temperature=0, num_predict=50)]
    assert got == ["one", " two", " three"]
    [body] = server.bodies()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "response_format" not in body
    [call] = ledger.unwritten()
    assert (call.outcome, call.prompt_tokens, call.completion_tokens) == ("ok", 9, 3)


async def test_an_error_event_in_a_stream_is_a_server_failure(server, connect) -> None:
    server.routes[("POST", "/v1/chat/completions")] = events(
        delta("half"), {"error": {"message": "runner crashed"}}, done=False
    )
    got: list[str] = []
    with pytest.raises(LLMUnavailable, match=r"failed \(HTTP 500\): runner crashed"):
        async for d in connect().chat_stream(MODEL, MSGS, temperature=0, num_predict=50):
            got.append(d)
    assert got == ["half"]


# -- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "kind", "words"),
    [
        (404, {"error": {"message": "model not found"}}, LLMUnreachable,
         "has no such model or endpoint: model not found"),
        (401, {"error": "bad key"}, LLMUnreachable,
         r"refused our credentials \(--llm-api-key\): bad key"),
        (503, {"error": {"message": "busy"}}, LLMUnavailable, r"failed \(HTTP 503\): busy"),
        (429, "slow down", LLMUnavailable, r"failed \(HTTP 429\): slow down"),
        (400, {"error": {"message": "bad schema"}}, LLMBadOutput,
         r"rejected the request \(HTTP 400\): bad schema"),
    ],
)  # fmt: skip
async def test_an_error_status_is_classed_with_the_servers_words(
    server, connect, status: int, body: object, kind: type, words: str
) -> None:
    server.routes[("POST", "/v1/chat/completions")] = lambda r: (
        httpx.Response(status, text=body)
        if isinstance(body, str)
        else httpx.Response(status, json=body)
    )
    with pytest.raises(kind, match=words) as info:
        await connect().chat_text(MODEL, MSGS, temperature=0, num_predict=10)
    assert type(info.value) is kind
    # A failing stream says the same, once the server's body is read.
    with pytest.raises(kind, match=words):
        async for _ in connect().chat_stream(MODEL, MSGS, temperature=0, num_predict=10):
            pass


async def test_models_are_listed_and_a_bare_name_is_its_latest_tag(server, connect) -> None:
    server.routes[("GET", "/v1/models")] = lambda r: httpx.Response(
        200, json={"data": [{"id": MODEL}, {"id": "llama3:latest"}, {"object": "model"}]}
    )
    client = connect()
    assert await client.list_models() == [MODEL, "llama3:latest"]
    assert await client.missing_models([MODEL, "llama3", "llama9"]) == ["llama9"]


async def test_a_host_ending_in_v1_is_the_servers_root_and_its_password_masked(connect) -> None:
    client = connect("http://user:secret@llm.local:8080/v1/")
    assert "secret" not in client.host and client.host.endswith("llm.local:8080")
