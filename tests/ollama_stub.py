"""A protocol-faithful Ollama stand-in, for tests only.

It is a real HTTP server (stdlib ``ThreadingHTTPServer`` on a background
thread), so it works under any event loop, with the real ``ollama`` client,
and as a subprocess::

    python tests/ollama_stub.py --port 0 --script script.json [--record requests.jsonl]

It prints ``OLLAMA_STUB_READY http://127.0.0.1:PORT`` once listening.

Wire format follows Ollama's API (docs/api.md): ``POST /api/chat`` and
``/api/generate`` stream NDJSON (HTTP/1.1 chunked, ``application/x-ndjson``)
unless ``"stream": false``, ending with a ``done: true`` chunk that carries
``done_reason`` and the counters; ``POST /api/embed`` returns L2-normalised
``embeddings``; ``GET /api/tags`` and ``/api/version``; an unknown model is a
404 ``{"error": "model \\"x\\" not found, try pulling it first"}``; an error in
the middle of a stream is an ``{"error": ...}`` line.  ``POST /api/show``
answers ``model_info`` with ``<arch>.context_length`` (``context_length``).

It honours the options a real Ollama honours, so a client that ignores them
fails here as it would there:

- ``num_ctx`` (default ``default_num_ctx``, 4096 like Ollama's): a prompt
  longer than that loses its *front* (the system prompt first), as Ollama's
  runner truncates; ``rules`` match on what is left, and the request records
  ``seen_text`` and ``truncated``;
- ``num_predict``: an answer longer than that is cut and ends with
  ``done_reason: "length"``;
- ``format``: accepted but not enforced, so an answer that ignores the schema
  is possible (script one).

Tokens are counted by ``stub_tokens`` (word pieces of at most 4 characters
and single punctuation marks): never more than the text's UTF-8 bytes, like
the real models' tokenizers, so the server's byte bound holds here too.

With ``llama_cpp_slot_ctx`` set, ``GET /props`` and the ``meta`` of each
``/v1/models`` entry answer as llama.cpp's ``llama-server`` does (its
per-slot ``default_generation_settings.n_ctx`` and the model's
``n_ctx_train``), for the ``openai`` backend's context detection; otherwise
``/props`` is a 404, as on Ollama.

Ollama's OpenAI-compatible endpoints are served too, as Ollama serves them:
``POST /v1/chat/completions`` (``max_tokens`` as ``num_predict``,
``response_format`` accepted, ``finish_reason``, server-sent events when
streaming; no ``num_ctx``: the default applies) and ``GET /v1/models``.

What it answers is scripted, first match wins:

1. fault switches (all endpoints): ``delay()``, ``fail_with()``, ``malformed()``;
2. ``responder(endpoint, body) -> Reply | None`` (all endpoints);
3. rules (``add_rule``: match endpoint / model / prompt substring);
4. the FIFO queue (``enqueue``), consumed by chat/generate only, so health
   checks never eat a scripted answer;
5. ``default`` (a ``Reply``), for chat/generate.

Every request body is recorded in ``stub.requests`` (dict subclasses with
``.method`` and ``.path``); tests wait for them with ``wait_for_requests``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import re
import signal
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DEFAULT_MODELS: tuple[str, ...] = (
    "qwen2.5:3b",
    "qwen2.5:1.5b",
    "qwen2.5:0.5b",
    "nomic-embed-text:latest",
)
OLLAMA_VERSION = "0.12.6"
OPENAI_CHAT = "/v1/chat/completions"
GENERATION_ENDPOINTS = frozenset({"/api/chat", "/api/generate", OPENAI_CHAT})
MODEL_ENDPOINTS = GENERATION_ENDPOINTS | {"/api/embed", "/api/embeddings", "/api/show"}
DEFAULT_NUM_CTX = 4096
DEFAULT_CONTEXT_LENGTH = 32768
# Per message, the chat template's control tokens (ChatML's is 5).
TEMPLATE_TOKENS = 5
_TOKEN = re.compile(r"\w{1,4}|[^\w\s]|\s+")


def stub_tokens(text: str) -> list[str]:
    """The stub's tokenizer: joined, the pieces give back the exact text."""
    return _TOKEN.findall(text)


# A truncated JSON document: what a body cut mid-write looks like.
MALFORMED_BODY = '{"model": "stub", "message": {"role": "assistant", "content": "{\\"enti'


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``content``: the model's text (chat ``message.content`` / generate
    ``response``).  ``status`` != 200 sends ``{"error": error}`` with that
    status.  ``delay``: seconds before the response headers (client timeouts).
    ``chunks``: explicit streaming pieces (default: split into words).
    ``chunk_delay``: pause between streamed chunks.  ``malformed``: send an
    unparseable body/line.  ``stream_error``: after the chunks, an ``{"error"}``
    line, as Ollama does when a runner dies mid-generation.  ``uncounted``:
    no token counts in the answer, as Ollama leaves ``prompt_eval_count`` out
    for a prompt it had cached and some OpenAI-compatible servers send no
    ``usage``.
    """

    content: str = ""
    status: int = 200
    error: str | None = None
    delay: float = 0.0
    chunks: tuple[str, ...] | None = None
    chunk_delay: float = 0.0
    malformed: bool = False
    stream_error: str | None = None
    done_reason: str = "stop"
    uncounted: bool = False

    @classmethod
    def of(cls, content: str | dict[str, Any] | list[Any], **kw: Any) -> Reply:
        """Text as-is; dicts/lists JSON-encoded (structured-output answers)."""
        text = content if isinstance(content, str) else json.dumps(content)
        return cls(content=text, **kw)

    @classmethod
    def error_status(cls, status: int, message: str | None = None) -> Reply:
        return cls(status=status, error=message or f"stub error {status}")

    @classmethod
    def slow(cls, seconds: float, content: str = "") -> Reply:
        return cls(content=content, delay=seconds)

    @classmethod
    def garbage(cls) -> Reply:
        return cls(malformed=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reply:
        """For JSON scripts: ``content`` may be an object (JSON-encoded)."""
        data = dict(data)
        content = data.pop("content", "")
        if not isinstance(content, str):
            content = json.dumps(content)
        if data.get("chunks") is not None:
            data["chunks"] = tuple(data["chunks"])
        return cls(content=content, **data)


Responder = Callable[[str, dict[str, Any]], Reply | None]


class RecordedRequest(dict[str, Any]):
    """A request body (so ``req["options"]["temperature"]`` works) plus
    ``.method``, ``.path`` and ``.headers`` (names in lower case).  GET
    requests have an empty body."""

    def __init__(
        self,
        method: str,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(body)
        self.method = method
        self.path = path
        self.headers = headers or {}

    #: What the "model" saw after num_ctx truncation (set for chat/generate).
    seen_text: str | None = None
    truncated: bool = False
    prompt_tokens: int = 0

    def prompt_text(self) -> str:
        """All prompt text of a chat/generate request, for substring asserts."""
        parts = [str(m.get("content", "")) for m in self.get("messages") or []]
        parts += [str(self.get(k, "")) for k in ("system", "prompt")]
        return "\n".join(p for p in parts if p)

    def options(self) -> dict[str, Any]:
        """Ollama options; for an OpenAI-style body, what Ollama maps them to."""
        if self.path == OPENAI_CHAT:
            out: dict[str, Any] = {}
            if self.get("max_tokens") is not None:
                out["num_predict"] = self["max_tokens"]
            if self.get("temperature") is not None:
                out["temperature"] = self["temperature"]
            return out
        opts = self.get("options")
        return dict(opts) if isinstance(opts, dict) else {}


@dataclass
class _Rule:
    reply: Reply
    endpoint: str | None = None
    model: str | None = None
    contains: str | None = None
    times: int | None = None  # None: unlimited

    def matches(self, endpoint: str, request: RecordedRequest) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if self.endpoint is None and endpoint not in GENERATION_ENDPOINTS:
            return False
        if self.endpoint is not None and self.endpoint != endpoint:
            return False
        if self.model is not None and _full_name(str(request.get("model", ""))) != _full_name(
            self.model
        ):
            return False
        seen = request.seen_text if request.seen_text is not None else request.prompt_text()
        return self.contains is None or self.contains in seen


@dataclass
class _Faults:
    status: int | None = None
    message: str | None = None
    delay: float = 0.0
    malformed: bool = False
    quote_credentials: bool = False


def _full_name(model: str) -> str:
    """Ollama treats "qwen2.5" as "qwen2.5:latest"."""
    return model if ":" in model else f"{model}:latest"


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def embed_vector(text: str, dim: int) -> list[float]:
    """Deterministic unit vector from a hash of ``text`` (like /api/embed, normalised)."""
    values: list[float] = []
    counter = 0
    while len(values) < dim:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values += [int.from_bytes(digest[i : i + 4], "big") / 2**31 - 1.0 for i in range(0, 32, 4)]
        counter += 1
    values = values[:dim]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def split_words(text: str) -> list[str]:
    """Default streaming chunks: word-ish pieces, whitespace kept, so joining
    the deltas gives back the exact text."""
    return re.findall(r"\s*\S+\s*|\s+", text) or [""]


class OllamaStub:
    """The stub server.  ``with OllamaStub() as stub: client(host=stub.url)``."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Iterable[str] | None = DEFAULT_MODELS,
        embed_dim: int = 384,
        default: Reply | None = None,
        responder: Responder | None = None,
        version: str = OLLAMA_VERSION,
        record_path: str | Path | None = None,
        context_length: int = DEFAULT_CONTEXT_LENGTH,
        default_num_ctx: int = DEFAULT_NUM_CTX,
        llama_cpp_slot_ctx: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        #: Pulled models; ``None`` accepts any model name.  Mutable: remove a
        #: model to simulate "not pulled".
        self.models: list[str] | None = None if models is None else list(models)
        self.embed_dim = embed_dim
        self.default = default if default is not None else Reply(content="{}")
        self.responder = responder
        self.version = version
        self.record_path = Path(record_path) if record_path else None
        #: What /api/show reports (and the most num_ctx may give), per model
        #: name in ``context_lengths``, else ``context_length``.
        self.context_length = context_length
        self.context_lengths: dict[str, int] = {}
        #: The context a request without num_ctx gets (Ollama's default).
        self.default_num_ctx = default_num_ctx
        #: Answer /props and /v1/models' meta as llama-server with this slot context.
        self.llama_cpp_slot_ctx = llama_cpp_slot_ctx
        #: False: /api/show answers without ``model_info``, as Ollama before
        #: 0.3 and some Ollama-compatible servers do.
        self.show_model_info = True
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._rules: list[_Rule] = []
        self._faults = _Faults()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._abort = threading.Event()

    # -- lifecycle -------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> OllamaStub:
        """Listen (again) on ``self.port``; the first start picks a free port."""
        if self._server is not None:
            return self
        self._abort = threading.Event()
        self._server = _Server((self.host, self.port), _Handler, self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ollama-stub:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Go away like a killed Ollama: stop listening and drop open connections
        (including keep-alive ones and requests still sleeping in a delay)."""
        server, self._server = self._server, None
        if server is None:
            return
        self._abort.set()
        server.shutdown()
        server.server_close()
        server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def restart(self) -> OllamaStub:
        self.stop()
        return self.start()

    def __enter__(self) -> OllamaStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting -------------------------------------------------------------

    def enqueue(self, *replies: Reply | str | dict[str, Any]) -> None:
        """Queue answers for the next chat/generate requests (FIFO).  A str or
        dict is shorthand for ``Reply.of(...)``."""
        with self._lock:
            self._queue.extend(r if isinstance(r, Reply) else Reply.of(r) for r in replies)

    def add_rule(
        self,
        reply: Reply | str | dict[str, Any],
        *,
        endpoint: str | None = None,
        model: str | None = None,
        contains: str | None = None,
        times: int | None = None,
    ) -> None:
        """Answer requests matching all given criteria (``contains``: substring of
        the prompt) with ``reply``, ``times`` times or forever.  Without
        ``endpoint`` a rule only applies to chat/generate."""
        rep = reply if isinstance(reply, Reply) else Reply.of(reply)
        with self._lock:
            self._rules.append(_Rule(rep, endpoint, model, contains, times))

    def fail_with(self, status: int, message: str | None = None) -> None:
        """Every request (all endpoints) answers HTTP ``status`` until cleared."""
        with self._lock:
            self._faults.status, self._faults.message = status, message

    def delay(self, seconds: float) -> None:
        """Every request waits ``seconds`` before answering, until cleared."""
        with self._lock:
            self._faults.delay = seconds

    def malformed(self, on: bool = True) -> None:
        """Every request gets an unparseable body, until cleared."""
        with self._lock:
            self._faults.malformed = on

    def refuse_quoting_credentials(self) -> None:
        """Every request (all endpoints) is refused with 401, quoting back the
        Authorization header it was sent, as some servers' error texts do."""
        with self._lock:
            self._faults.quote_credentials = True

    def clear_faults(self) -> None:
        with self._lock:
            self._faults = _Faults()

    def reset(self) -> None:
        """Forget requests, queue, rules and faults (not models/responder)."""
        with self._lock:
            self.requests.clear()
            self._queue.clear()
            self._rules.clear()
            self._faults = _Faults()

    # -- inspection ------------------------------------------------------------

    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def wait_for_requests_sync(
        self, n: int, timeout: float = 5.0, *, path: str | None = None
    ) -> list[RecordedRequest]:
        """Block until at least ``n`` requests (to ``path``, if given) were
        received; returns them.  Raises ``TimeoutError``."""

        def matching() -> list[RecordedRequest]:
            return [r for r in self.requests if path is None or r.path == path]

        with self._cond:
            if not self._cond.wait_for(lambda: len(matching()) >= n, timeout):
                seen = [f"{r.method} {r.path}" for r in self.requests]
                raise TimeoutError(f"stub got {len(matching())}/{n} requests in {timeout}s: {seen}")
            return matching()

    async def wait_for_requests(
        self,
        n: int,
        timeout: float = 5.0,  # noqa: ASYNC109 - mirrors the sync version's signature
        *,
        path: str | None = None,
    ) -> list[RecordedRequest]:
        """Async version (waits in a worker thread; never blocks the loop)."""
        return await asyncio.to_thread(self.wait_for_requests_sync, n, timeout, path=path)

    # -- request handling (server threads) ---------------------------------------

    def _record(
        self,
        method: str,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> RecordedRequest:
        req = RecordedRequest(method, path, body, headers)
        with self._cond:
            self.requests.append(req)
            if self.record_path is not None:
                line = json.dumps({"method": method, "path": path, "body": body})
                with self.record_path.open("a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
            self._cond.notify_all()
        return req

    def _faults_now(self) -> _Faults:
        with self._lock:
            return replace(self._faults)

    def model_context(self, model: str) -> int:
        return self.context_lengths.get(_full_name(model), self.context_length)

    def _fit_prompt(self, req: RecordedRequest) -> None:
        """Cut the prompt from the front to the request's context, as Ollama's
        runner does; record what is left."""
        model = str(req.get("model", ""))
        num_ctx = req.options().get("num_ctx") or self.default_num_ctx
        num_ctx = min(int(num_ctx), self.model_context(model))
        messages = req.get("messages") or []
        texts = [str(m.get("content", "")) for m in messages if isinstance(m, dict)]
        texts += [str(req.get(k, "")) for k in ("system", "prompt") if req.get(k)]
        pieces = [stub_tokens(t) for t in texts]
        total = sum(len(p) + TEMPLATE_TOKENS for p in pieces)
        drop = max(0, total - num_ctx)
        req.truncated = drop > 0
        kept: list[str] = []
        for p in pieces:
            cost = len(p) + TEMPLATE_TOKENS
            if drop >= cost:
                drop -= cost
                continue
            kept.append("".join(p[max(0, drop - TEMPLATE_TOKENS) :]))
            drop = 0
        req.seen_text = "\n".join(k for k in kept if k)
        req.prompt_tokens = min(total, num_ctx)

    def _scripted(self, endpoint: str, req: RecordedRequest) -> Reply | None:
        if endpoint in GENERATION_ENDPOINTS:
            self._fit_prompt(req)
        if self.responder is not None:
            reply = self.responder(endpoint, dict(req))
            if reply is not None:
                return reply
        with self._lock:
            for rule in self._rules:
                if rule.matches(endpoint, req):
                    if rule.times is not None:
                        rule.times -= 1
                    return rule.reply
            if endpoint in GENERATION_ENDPOINTS:
                return self._queue.popleft() if self._queue else self.default
        return None

    def _model_error(self, endpoint: str, body: dict[str, Any]) -> tuple[int, str] | None:
        if endpoint not in MODEL_ENDPOINTS:
            return None
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return 400, "model is required"
        if self.models is not None and _full_name(model) not in {
            _full_name(m) for m in self.models
        }:
            return 404, f'model "{model}" not found, try pulling it first'
        return None

    def _show(self, model: str) -> dict[str, Any]:
        family = model.split(":")[0]
        arch = "qwen2" if family.startswith("qwen2") else re.sub(r"\W", "", family) or "llama"
        shown: dict[str, Any] = {
            "license": "",
            "modelfile": f"FROM {model}\n",
            "parameters": 'stop "<|im_end|>"',
            "template": "{{ .Prompt }}",
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": arch,
                "families": [arch],
                "parameter_size": "3.1B",
                "quantization_level": "Q4_K_M",
            },
            "model_info": {
                "general.architecture": arch,
                "general.parameter_count": 3_085_938_688,
                f"{arch}.context_length": self.model_context(model),
                f"{arch}.embedding_length": 2048,
            },
            "capabilities": ["completion"],
            "modified_at": "2025-06-01T12:00:00.000000000Z",
        }
        if not self.show_model_info:
            del shown["model_info"]
        return shown

    def _openai_models(self) -> dict[str, Any]:
        models = self.models if self.models is not None else list(DEFAULT_MODELS)
        return {
            "object": "list",
            "data": [self._openai_model(m) for m in models],
        }

    def _openai_model(self, model: str) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": _full_name(model),
            "object": "model",
            "created": 1748779200,
            "owned_by": "library",
        }
        if self.llama_cpp_slot_ctx is not None:
            entry["owned_by"] = "llamacpp"
            entry["meta"] = {
                "vocab_type": 2,
                "n_vocab": 49152,
                "n_ctx_train": self.model_context(model),
                "n_embd": 576,
                "n_params": 134_515_008,
                "size": 98_362_432,
            }
        return entry

    def _props(self) -> dict[str, Any]:
        return {
            "default_generation_settings": {"n_ctx": self.llama_cpp_slot_ctx, "temperature": 0.8},
            "total_slots": 2,
            "model_path": "/models/model.gguf",
            "chat_template": "{{ messages }}",
            "build_info": "b4000-stub",
        }

    def _tags(self) -> dict[str, Any]:
        models = self.models if self.models is not None else list(DEFAULT_MODELS)
        return {
            "models": [
                {
                    "name": _full_name(m),
                    "model": _full_name(m),
                    "modified_at": "2025-06-01T12:00:00.000000000Z",
                    "size": 1_929_912_432,
                    "digest": hashlib.sha256(m.encode()).hexdigest(),
                    "details": {
                        "parent_model": "",
                        "format": "gguf",
                        "family": m.split(":")[0],
                        "families": [m.split(":")[0]],
                        "parameter_size": "3.1B",
                        "quantization_level": "Q4_K_M",
                    },
                }
                for m in models
            ]
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # restart on the same port despite TIME_WAIT

    def __init__(self, address: tuple[str, int], handler: type, stub: OllamaStub) -> None:
        self.stub = stub
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out or closed its pool resets the socket; that is
        # normal traffic, not a stub bug worth a traceback on stderr.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Aborted(Exception):
    """The stub was stopped while this request was waiting."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive + chunked streams, like Ollama
    server: _Server
    timeout = 30  # idle keep-alive connections end eventually
    _req: RecordedRequest

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    @property
    def stub(self) -> OllamaStub:
        return self.server.stub

    def do_HEAD(self) -> None:
        self._send_raw(200, b"", "text/plain; charset=utf-8", head=True)

    def do_GET(self) -> None:
        self._dispatch("GET", {})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError as exc:
            self.stub._record("POST", self.path, {})
            self._send_json(400, {"error": f"invalid JSON: {exc.msg}"})
            return
        if not isinstance(body, dict):
            body = {"_body": body}
        self._dispatch("POST", body)

    def _dispatch(self, method: str, body: dict[str, Any]) -> None:
        path = self.path.split("?")[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = self.stub._record(method, path, body, headers)
        self._req = req
        known = {
            ("GET", "/"),
            ("GET", "/api/tags"),
            ("GET", "/api/version"),
            ("POST", "/api/chat"),
            ("POST", "/api/generate"),
            ("POST", "/api/embed"),
            ("POST", "/api/embeddings"),
            ("POST", "/api/show"),
            ("POST", OPENAI_CHAT),
            ("GET", "/v1/models"),
            ("GET", "/props"),
        }
        if (method, path) not in known or (
            path == "/props" and self.stub.llama_cpp_slot_ctx is None
        ):
            self._send_raw(404, b"404 page not found", "text/plain")
            return
        try:
            # Order: server-wide faults, then Ollama's own checks, then the script.
            faults = self.stub._faults_now()
            if faults.delay and self.stub._abort.wait(faults.delay):
                raise _Aborted
            if faults.status is not None:
                self._send_error(faults.status, faults.message)
                return
            if faults.quote_credentials:
                sent = self.headers.get("Authorization", "(none)")
                self._send_error(401, f"invalid credentials {sent}")
                return
            if faults.malformed and not self._streaming(path, body):
                self._send_raw(200, MALFORMED_BODY.encode(), "application/json; charset=utf-8")
                return
            error = self.stub._model_error(path, body)
            if error is not None:
                self._send_error(*error)
                return
            reply = self.stub._scripted(path, req)
            if faults.malformed:
                reply = replace(reply or self.stub.default, malformed=True)
            if reply is not None and reply.delay and self.stub._abort.wait(reply.delay):
                raise _Aborted
            if reply is not None and reply.status != 200:
                self._send_error(reply.status, reply.error)
                return
            if reply is not None and reply.malformed and not self._streaming(path, body):
                self._send_raw(200, MALFORMED_BODY.encode(), "application/json; charset=utf-8")
                return
            self._answer(path, body, reply)
        except (_Aborted, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send_error(self, status: int, message: str | None) -> None:
        text = message or f"stub error {status}"
        if self.path.startswith("/v1/"):
            # Ollama's OpenAI-compatible endpoints answer OpenAI's error shape.
            kind = "invalid_request_error" if status < 500 else "api_error"
            self._send_json(
                status, {"error": {"message": text, "type": kind, "param": None, "code": None}}
            )
            return
        self._send_json(status, {"error": text})

    def _answer(self, path: str, body: dict[str, Any], reply: Reply | None) -> None:
        stub = self.stub
        if path == "/":
            self._send_raw(200, b"Ollama is running", "text/plain; charset=utf-8")
        elif path == "/api/version":
            self._send_json(200, {"version": stub.version})
        elif path == "/api/tags":
            self._send_json(200, stub._tags())
        elif path == "/api/show":
            self._send_json(200, stub._show(str(body["model"])))
        elif path == "/v1/models":
            self._send_json(200, stub._openai_models())
        elif path == "/props":
            self._send_json(200, stub._props())
        elif path == OPENAI_CHAT:
            self._openai_chat(body, reply or stub.default)
        elif path == "/api/embed":
            inputs = body.get("input", [])
            if isinstance(inputs, str):
                inputs = [inputs]
            if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
                self._send_json(400, {"error": "invalid input type"})
                return
            dim = int(body.get("dimensions") or stub.embed_dim)
            self._send_json(
                200,
                {
                    "model": body["model"],
                    "embeddings": [embed_vector(t, dim) for t in inputs],
                    "total_duration": 14_143_917,
                    "load_duration": 1_019_500,
                    "prompt_eval_count": sum(max(1, len(t) // 4) for t in inputs),
                },
            )
        elif path == "/api/embeddings":  # legacy single-prompt endpoint
            self._send_json(
                200, {"embedding": embed_vector(str(body.get("prompt", "")), stub.embed_dim)}
            )
        else:
            self._generate(path, body, reply or stub.default)

    def _generate(self, path: str, body: dict[str, Any], reply: Reply) -> None:
        chat = path == "/api/chat"
        if chat and not isinstance(body.get("messages", []), list):
            self._send_json(400, {"error": "messages must be a list"})
            return
        model = body["model"]
        req = self._req
        self.stub._fit_prompt(req)
        content, done_reason = self._cut_answer(req, reply)

        def piece(text: str, done: bool) -> dict[str, Any]:
            out: dict[str, Any] = {"model": model, "created_at": _now()}
            if chat:
                out["message"] = {"role": "assistant", "content": text}
            else:
                out["response"] = text
            out["done"] = done
            return out

        def final(text: str, n_chunks: int) -> dict[str, Any]:
            out = piece(text, True)
            out.update(
                done_reason=done_reason,
                total_duration=123_456_789,
                load_duration=1_234_567,
                prompt_eval_count=max(1, req.prompt_tokens),
                prompt_eval_duration=12_345_678,
                eval_count=n_chunks,
                eval_duration=98_765_432,
            )
            if reply.uncounted:
                for key in ("prompt_eval_count", "prompt_eval_duration", "eval_count"):
                    del out[key]
            return out

        if not self._streaming(path, body):
            self._send_json(200, final(content, len(stub_tokens(content))))
            return

        chunks = self._chunks(reply, content)
        self._start_stream()
        if reply.malformed:
            self._write_chunk(MALFORMED_BODY + "\n")
            self._end_stream()
            return
        for i, text in enumerate(chunks):
            if i and reply.chunk_delay and self.stub._abort.wait(reply.chunk_delay):
                raise _Aborted
            self._write_chunk(json.dumps(piece(text, False)) + "\n")
        if reply.stream_error is not None:
            self._write_chunk(json.dumps({"error": reply.stream_error}) + "\n")
        else:
            self._write_chunk(json.dumps(final("", len(chunks))) + "\n")
        self._end_stream()

    @staticmethod
    def _cut_answer(req: RecordedRequest, reply: Reply) -> tuple[str, str]:
        """The answer, cut at num_predict tokens (then done_reason "length")."""
        limit = req.options().get("num_predict")
        pieces = stub_tokens(reply.content)
        if isinstance(limit, int) and limit >= 0 and len(pieces) > limit:
            return "".join(pieces[:limit]), "length"
        return reply.content, reply.done_reason

    @staticmethod
    def _chunks(reply: Reply, content: str) -> list[str]:
        """Streamed pieces of ``content`` (the scripted ones, cut like it)."""
        if reply.chunks is None:
            return split_words(content)
        if content == reply.content:
            return list(reply.chunks)
        out, left = [], len(content)
        for chunk in reply.chunks:
            if left <= 0:
                break
            out.append(chunk[:left])
            left -= len(chunk)
        return out

    def _openai_chat(self, body: dict[str, Any], reply: Reply) -> None:
        """Ollama's /v1/chat/completions: OpenAI's shapes around the same model."""
        if not isinstance(body.get("messages"), list):
            self._send_error(400, "messages must be a list")
            return
        model = body["model"]
        req = self._req
        self.stub._fit_prompt(req)
        content, reason = self._cut_answer(req, reply)
        created = 1748779200
        base = {
            "id": "chatcmpl-stub",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_ollama",
        }
        if body.get("stream") is not True:
            usage = {
                "prompt_tokens": req.prompt_tokens,
                "completion_tokens": len(stub_tokens(content)),
            }
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            self._send_json(
                200,
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": reason,
                        }
                    ],
                    **({} if reply.uncounted else {"usage": usage}),
                },
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(delta: dict[str, Any], finish: str | None) -> None:
            chunk = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            self._write_chunk(f"data: {json.dumps(chunk)}\n\n")

        if reply.malformed:
            self._write_chunk("data: " + MALFORMED_BODY + "\n\n")
            self._end_stream()
            return
        for i, text in enumerate(self._chunks(reply, content)):
            if i and reply.chunk_delay and self.stub._abort.wait(reply.chunk_delay):
                raise _Aborted
            event({"role": "assistant", "content": text}, None)
        if reply.stream_error is not None:
            error = {"error": {"message": reply.stream_error, "type": "api_error"}}
            self._write_chunk(f"data: {json.dumps(error)}\n\n")
        else:
            event({"role": "assistant", "content": ""}, reason)
            options = body.get("stream_options")
            wanted = isinstance(options, dict) and options.get("include_usage") is True
            if wanted and not reply.uncounted:
                # OpenAI's last event when asked: no choices, the counts.
                completion = len(stub_tokens(content))
                usage = {
                    "prompt_tokens": req.prompt_tokens,
                    "completion_tokens": completion,
                    "total_tokens": req.prompt_tokens + completion,
                }
                chunk = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
                self._write_chunk(f"data: {json.dumps(chunk)}\n\n")
            self._write_chunk("data: [DONE]\n\n")
        self._end_stream()

    @staticmethod
    def _streaming(path: str, body: dict[str, Any]) -> bool:
        if path == OPENAI_CHAT:
            return body.get("stream") is True
        return path in GENERATION_ENDPOINTS and body.get("stream", True) is not False

    # -- wire helpers ----------------------------------------------------------

    def _send_json(self, status: int, obj: dict[str, Any]) -> None:
        self._send_raw(status, json.dumps(obj).encode(), "application/json; charset=utf-8")

    def _send_raw(self, status: int, data: bytes, ctype: str, *, head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)
        self.wfile.flush()

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _write_chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


# -- subprocess mode ------------------------------------------------------------


def load_script(stub: OllamaStub, script: dict[str, Any]) -> None:
    """Apply a JSON script::

        {"models": [...] | null, "embed_dim": 384, "default": {Reply},
         "queue": [{Reply}, ...],
         "rules": [{"endpoint", "model", "contains", "times", "reply": {Reply}}],
         "faults": {"fail_with": 503, "delay": 0.5, "malformed": false}}

    A Reply dict has the ``Reply`` fields; ``content`` may be a JSON object.
    """
    if "models" in script:
        stub.models = None if script["models"] is None else list(script["models"])
    if "embed_dim" in script:
        stub.embed_dim = int(script["embed_dim"])
    if "default" in script:
        stub.default = Reply.from_dict(script["default"])
    stub.enqueue(*(Reply.from_dict(r) for r in script.get("queue", [])))
    for rule in script.get("rules", []):
        rule = dict(rule)
        stub.add_rule(Reply.from_dict(rule.pop("reply")), **rule)
    faults = script.get("faults", {})
    if faults.get("fail_with") is not None:
        stub.fail_with(int(faults["fail_with"]), faults.get("message"))
    if faults.get("delay"):
        stub.delay(float(faults["delay"]))
    if faults.get("malformed"):
        stub.malformed()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Ollama stand-in for tests")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", type=Path, help="JSON script (see load_script)")
    parser.add_argument("--record", type=Path, help="append each request as a JSON line")
    args = parser.parse_args(argv)

    stub = OllamaStub(host=args.host, port=args.port, record_path=args.record)
    if args.script is not None:
        load_script(stub, json.loads(args.script.read_text(encoding="utf-8")))
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with stub:
        print(f"OLLAMA_STUB_READY {stub.url}", flush=True)
        done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
