"""Protocol-faithful stand-ins of the agent hosts' model APIs, for tests only.

One real HTTP server (stdlib ``ThreadingHTTPServer`` on a background thread,
an ephemeral port) speaks the three APIs the agent hosts call, as the hosts'
own clients expect them:

- **Anthropic Messages** (Claude Code, ``ANTHROPIC_BASE_URL``):
  ``POST /v1/messages`` answers a ``message`` object, or with ``"stream":
  true`` server-sent events (``message_start``, ``content_block_start``,
  ``ping``, ``content_block_delta`` with ``text_delta``,
  ``content_block_stop``, ``message_delta`` with the ``stop_reason`` and
  usage, ``message_stop``); ``POST /v1/messages/count_tokens``. The key comes
  in ``x-api-key`` (or ``Authorization: Bearer``) and ``anthropic-version``
  is required, as on the real API; errors are ``{"type": "error", "error":
  {"type", "message"}}``.
- **OpenAI Responses** (Codex CLI, a ``model_providers`` entry's
  ``base_url``): ``POST /v1/responses`` answers a ``response`` object, or
  streamed, the events ``response.created``, ``response.in_progress``,
  ``response.output_item.added``, ``response.content_part.added``,
  ``response.output_text.delta``, ``response.output_text.done``,
  ``response.content_part.done``, ``response.output_item.done`` and
  ``response.completed`` (with usage), each with its ``sequence_number``.
  ``Authorization: Bearer`` is required; errors are ``{"error": {"message",
  "type", "code"}}``.
- **Gemini** (Gemini CLI, ``GOOGLE_GEMINI_BASE_URL``):
  ``POST /v1beta/models/{model}:generateContent``,
  ``:streamGenerateContent?alt=sse`` (``data:`` chunks of
  ``GenerateContentResponse``) and ``:countTokens``. The key comes in
  ``x-goog-api-key`` (or ``?key=``). A request whose ``generationConfig``
  asks for JSON with a schema (the CLI's routing and checks ask for that) is
  answered with an instance of the schema, as the real model is constrained
  to; errors are ``{"error": {"code", "message", "status"}}``.

Every request is recorded (``stub.requests``: the API, path, headers and JSON
body), so a test can check what reached the model. The answer text is
``reply`` (a string, or a function of the recorded request).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["ModelAPIStub", "Recorded"]

ANTHROPIC = "anthropic"
OPENAI = "openai"
GEMINI = "gemini"


@dataclass
class Recorded:
    api: str
    method: str
    path: str
    headers: dict[str, str]
    body: Any = field(default_factory=dict)

    def text(self) -> str:
        """Every string in the request's body, joined: what the model was shown."""
        out: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, dict):
                for v in value.values():
                    walk(v)
            elif isinstance(value, list):
                for v in value:
                    walk(v)

        walk(self.body)
        return "\n".join(out)


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


def schema_instance(schema: dict[str, Any]) -> Any:
    """The smallest value a JSON schema (OpenAPI-style types, as Gemini takes
    them) accepts: required properties only, first enum value."""
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    kind = str(schema.get("type", "")).upper()
    if kind == "OBJECT":
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        return {k: schema_instance(properties[k]) for k in required if k in properties}
    if kind == "ARRAY":
        return []
    if kind in ("INTEGER", "NUMBER"):
        return schema.get("minimum", 1)
    if kind == "BOOLEAN":
        return False
    return "stub"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], stub: ModelAPIStub) -> None:
        super().__init__(address, _Handler)
        self.stub = stub


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    # -- plumbing --------------------------------------------------------------

    def _body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _events(self, events: list[tuple[str | None, Any]], *, crlf: bool = False) -> None:
        """Server-sent events, then the connection closes (the stream's end)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        end = "\r\n" if crlf else "\n"
        for name, data in events:
            chunk = (f"event: {name}{end}" if name else "") + f"data: {json.dumps(data)}{end}{end}"
            self.wfile.write(chunk.encode())
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        self.server.stub.record("", "GET", self.path, dict(self.headers), {})
        self._json(404, {"error": {"message": f"no GET {self.path} here"}})

    def do_POST(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path
        body = self._body()
        stub = self.server.stub
        if path.startswith("/v1/messages"):
            request = stub.record(ANTHROPIC, "POST", self.path, dict(self.headers), body)
            self._anthropic(path, request)
        elif path.endswith("/responses"):
            request = stub.record(OPENAI, "POST", self.path, dict(self.headers), body)
            self._openai(request)
        elif path.startswith("/v1beta/models/"):
            request = stub.record(GEMINI, "POST", self.path, dict(self.headers), body)
            self._gemini(path, request)
        else:
            stub.record("", "POST", self.path, dict(self.headers), body)
            self._json(404, {"error": {"message": f"no POST {path} here"}})

    # -- Anthropic Messages ------------------------------------------------------

    def _anthropic_error(self, status: int, kind: str, message: str) -> None:
        self._json(status, {"type": "error", "error": {"type": kind, "message": message}})

    def _anthropic(self, path: str, request: Recorded) -> None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if not (headers.get("x-api-key") or headers.get("authorization")):
            return self._anthropic_error(
                401, "authentication_error", "x-api-key header is required"
            )
        if "anthropic-version" not in headers:
            return self._anthropic_error(
                400, "invalid_request_error", "anthropic-version header is required"
            )
        body = request.body if isinstance(request.body, dict) else {}
        if path == "/v1/messages/count_tokens":
            return self._json(200, {"input_tokens": _tokens(request.text())})
        if not body.get("model") or not isinstance(body.get("messages"), list):
            return self._anthropic_error(
                400, "invalid_request_error", "model and messages are required"
            )
        text = self.server.stub.answer(request)
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        usage_in = _tokens(request.text())
        if not body.get("stream"):
            return self._json(
                200,
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage_in, "output_tokens": _tokens(text)},
                },
            )
        start = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": usage_in, "output_tokens": 1},
        }
        self._events(
            [
                ("message_start", {"type": "message_start", "message": start}),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                ("ping", {"type": "ping"}),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": text},
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": _tokens(text)},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )

    # -- OpenAI Responses --------------------------------------------------------

    def _openai(self, request: Recorded) -> None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if not headers.get("authorization", "").startswith("Bearer "):
            return self._json(
                401,
                {
                    "error": {
                        "message": "You didn't provide an API key.",
                        "type": "invalid_request_error",
                        "code": None,
                    }
                },
            )
        body = request.body if isinstance(request.body, dict) else {}
        if not body.get("model") or "input" not in body:
            return self._json(
                400,
                {
                    "error": {
                        "message": "model and input are required",
                        "type": "invalid_request_error",
                        "code": "missing_required_parameter",
                    }
                },
            )
        text = self.server.stub.answer(request)
        response_id = f"resp_{uuid.uuid4().hex}"
        item_id = f"msg_{uuid.uuid4().hex}"
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {
            "type": "message",
            "id": item_id,
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }
        usage = {
            "input_tokens": _tokens(request.text()),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": _tokens(text),
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": _tokens(request.text()) + _tokens(text),
        }
        response = {
            "id": response_id,
            "object": "response",
            "created_at": 0,
            "status": "in_progress",
            "model": body["model"],
            "output": [],
            "usage": None,
        }
        done = {**response, "status": "completed", "output": [item], "usage": usage}
        if not body.get("stream"):
            return self._json(200, done)
        at = {"item_id": item_id, "output_index": 0, "content_index": 0}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": response},
            {"type": "response.in_progress", "response": response},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress", "content": []},
            },
            {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
            {"type": "response.output_text.delta", **at, "delta": text},
            {"type": "response.output_text.done", **at, "text": text},
            {"type": "response.content_part.done", **at, "part": part},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": done},
        ]
        for number, event in enumerate(events):
            event["sequence_number"] = number
        self._events([(e["type"], e) for e in events])

    # -- Gemini ------------------------------------------------------------------

    def _gemini(self, path: str, request: Recorded) -> None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        query = parse_qs(urlsplit(request.path).query)
        if not (headers.get("x-goog-api-key") or query.get("key")):
            return self._json(
                403,
                {
                    "error": {
                        "code": 403,
                        "message": "Method doesn't allow unregistered callers.",
                        "status": "PERMISSION_DENIED",
                    }
                },
            )
        body = request.body if isinstance(request.body, dict) else {}
        model, _, method = path.removeprefix("/v1beta/models/").partition(":")
        if method == "countTokens":
            return self._json(200, {"totalTokens": _tokens(request.text())})
        if method not in ("generateContent", "streamGenerateContent") or not body.get("contents"):
            return self._json(
                400,
                {
                    "error": {
                        "code": 400,
                        "message": f"{method or 'a method'} with contents is required",
                        "status": "INVALID_ARGUMENT",
                    }
                },
            )
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if schema and config.get("responseMimeType") == "application/json":
            text = json.dumps(schema_instance(schema))
        else:
            text = self.server.stub.answer(request)
        chunk = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": text}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": _tokens(request.text()),
                "candidatesTokenCount": _tokens(text),
                "totalTokenCount": _tokens(request.text()) + _tokens(text),
            },
            "modelVersion": model,
        }
        if method == "generateContent":
            return self._json(200, chunk)
        if query.get("alt") != ["sse"]:
            # Without alt=sse the API streams one JSON array; the CLI never asks so.
            return self._json(200, [chunk])
        self._events([(None, chunk)], crlf=True)


class ModelAPIStub:
    """``with ModelAPIStub(reply="...") as stub: ... stub.url ...``"""

    def __init__(self, reply: str | Callable[[Recorded], str] = "OK.") -> None:
        self.reply = reply
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ModelAPIStub:
        self._server = _Server(("127.0.0.1", 0), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="model-api-stub",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def record(
        self, api: str, method: str, path: str, headers: dict[str, str], body: Any
    ) -> Recorded:
        request = Recorded(api, method, path, headers, body)
        with self._lock:
            self.requests.append(request)
        return request

    def answer(self, request: Recorded) -> str:
        return self.reply(request) if callable(self.reply) else self.reply

    def calls(self, api: str) -> list[Recorded]:
        """The requests of ``api`` that asked the model for an answer."""
        with self._lock:
            found = list(self.requests)
        return [
            r
            for r in found
            if r.api == api
            and not r.path.startswith("/v1/messages/count_tokens")
            and ":countTokens" not in r.path
        ]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
